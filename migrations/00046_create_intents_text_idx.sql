-- +goose Up
-- Authorize asks, for an intent about to take the account's claim on a text, whether an intent
-- of the account with the same text stored before it still waits to be sent (pending, or failed
-- for a reason its policy retries): the text is that one's. Only intents with a text that may
-- still move are in it, in stored order, so the question reads the few that match, first the
-- earliest.
CREATE INDEX intents_text_idx ON intents (account_id, text_hash, created_at, batch_ord, delivery_key) WHERE text_hash IS NOT NULL AND state IN ('pending', 'failed');

-- +goose Down
DROP INDEX intents_text_idx;
