-- +goose Up
-- The console lists published intents newest first and counts those of the last hour: without
-- this index either reads the whole ledger. A published intent never changes again, so each
-- costs one entry, written by its last transition, never one per transition.
CREATE INDEX intents_published_at_idx ON intents (updated_at, delivery_key) WHERE state = 'published';

-- +goose Down
DROP INDEX intents_published_at_idx;
