-- +goose Up
-- The intents that wait for a person: atmost intents ls --state parked pages through this
-- index, and the sweeper's gauge counts them here. Parked intents are few and rarely change, so
-- it costs an entry only when an intent is parked, where finding them without it would read the
-- whole ledger, published intents and all.
CREATE INDEX intents_parked_idx ON intents (delivery_key) WHERE state = 'parked';

-- +goose Down
DROP INDEX intents_parked_idx;
