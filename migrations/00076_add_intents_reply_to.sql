-- +goose Up
-- The delivery key of the intent this one answers (envelope reply_to: a reply, the next post of
-- a thread), NULL for an intent with a literal target. Part of the intent's own delivery key;
-- the parent's object id is read from the parent when the reply is sent, never stored here.
-- Authorize refuses to authorize a reply whose parent is not published, and a reply whose
-- parent ended without being published is parked dependency_unmet.
ALTER TABLE intents ADD COLUMN reply_to BYTEA NULL;

-- +goose Down
ALTER TABLE intents DROP COLUMN reply_to;
