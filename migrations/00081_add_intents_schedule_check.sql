-- +goose Up
-- An intent that expires does so after it may first be sent, as identity.ParseEnvelope
-- checks before the statement runs.
ALTER TABLE intents ADD CONSTRAINT intents_schedule_check CHECK (not_before IS NULL OR expires_at IS NULL OR expires_at > not_before);

-- +goose Down
ALTER TABLE intents DROP CONSTRAINT intents_schedule_check;
