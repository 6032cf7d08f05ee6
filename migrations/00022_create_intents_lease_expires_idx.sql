-- +goose Up
-- The sweeper finds expired leases through this index; only claimed and authorized intents
-- carry a lease, so it stays as small as the work in flight.
CREATE INDEX intents_lease_expires_idx ON intents (lease_expires_at) WHERE lease_expires_at IS NOT NULL;

-- +goose Down
DROP INDEX intents_lease_expires_idx;
