-- +goose Up
-- The replies that wait for a parent, found by the parent's key when the parent's publication
-- (or its end without one) is relayed: without this index each such event would read the
-- whole ledger. Only replies have an entry.
CREATE INDEX intents_reply_to_idx ON intents (reply_to) WHERE reply_to IS NOT NULL;

-- +goose Down
DROP INDEX intents_reply_to_idx;
