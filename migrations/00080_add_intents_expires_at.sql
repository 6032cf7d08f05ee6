-- +goose Up
-- The time from which the intent is never sent (the envelope's expires_at), NULL for none:
-- Begin and Authorize park it expired at or after it, whatever led it back to pending (a
-- retry, an account that held, a restore). An attribute, never part of the delivery key: a
-- duplicate submit keeps the first stored value.
ALTER TABLE intents ADD COLUMN expires_at TIMESTAMPTZ NULL;

-- +goose Down
ALTER TABLE intents DROP COLUMN expires_at;
