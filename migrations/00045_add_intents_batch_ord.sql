-- +goose Up
-- An intent's place in the batch that stored it (Submit: 1 for the first message of an ingest
-- fetch, 2 for the next, ...). The intents of one batch share created_at, the transaction's
-- clock; batch_ord then says which the producer published first, so that among intents of one
-- account with the same text the one stored first wins the duplicate-text claim. Intents stored
-- before this column, and those a restore recreated, have 0.
ALTER TABLE intents ADD COLUMN batch_ord INT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE intents DROP COLUMN batch_ord;
