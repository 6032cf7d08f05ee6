-- +goose Up
-- A serving account whose failures are counted (a suspect one) holds a single slot too, the one
-- attempt it lets in flight: the CHECK that ties the slot to probing is dropped here and added
-- again with it by the next migration.
ALTER TABLE account_health DROP CONSTRAINT account_health_probe_check;

-- +goose Down
ALTER TABLE account_health ADD CONSTRAINT account_health_probe_check CHECK ((state = 'probing') = (probe_token IS NOT NULL AND probe_until IS NOT NULL));
