-- +goose Up
-- A parent is a delivery key (32 bytes) and never the reply's own.
ALTER TABLE intents ADD CONSTRAINT intents_reply_to_check CHECK (reply_to IS NULL OR (octet_length(reply_to) = 32 AND reply_to <> delivery_key));

-- +goose Down
ALTER TABLE intents DROP CONSTRAINT intents_reply_to_check;
