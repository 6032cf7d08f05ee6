-- +goose Up
-- The console lists the parked intents newest first, and bulk actions select them by time
-- ("parked before 10:00"): through this index a page reads its own rows, never all the parked.
-- Parked intents are few and rarely change, so it costs an entry only when an intent is parked.
CREATE INDEX intents_parked_at_idx ON intents (updated_at, delivery_key) WHERE state = 'parked';

-- +goose Down
DROP INDEX intents_parked_at_idx;
