-- +goose Up
-- history_intent_fkey goes for the reasons migration 39 gives; Ledger.Orphans counts history
-- rows without their intent.
ALTER TABLE history DROP CONSTRAINT history_intent_fkey;

-- +goose Down
ALTER TABLE history ADD CONSTRAINT history_intent_fkey FOREIGN KEY (delivery_key) REFERENCES intents (delivery_key);
