-- +goose Up
-- The earliest time the intent may be authorized (the envelope's not_before), NULL for none.
-- Begin opens no attempt before it and Authorize refuses before it (not_due), so the intent
-- waits pending, spending nothing. An attribute, never part of the delivery key: a duplicate
-- submit keeps the first stored value.
ALTER TABLE intents ADD COLUMN not_before TIMESTAMPTZ NULL;

-- +goose Down
ALTER TABLE intents DROP COLUMN not_before;
