-- +goose Up
-- The attempt cap counts only the attempts authorized while the account was serving: a probe,
-- let through while the account held, is authorized and counted in attempts_authorized, and
-- also here; the cap limits attempts_authorized - attempts_uncounted.
ALTER TABLE intents ADD COLUMN attempts_uncounted INT NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE intents DROP COLUMN attempts_uncounted;
