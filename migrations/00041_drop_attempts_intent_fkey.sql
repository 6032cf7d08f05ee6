-- +goose Up
-- attempts_intent_fkey goes for the reasons migration 39 gives; Ledger.Orphans counts attempts
-- without their intent.
ALTER TABLE attempts DROP CONSTRAINT attempts_intent_fkey;

-- +goose Down
ALTER TABLE attempts ADD CONSTRAINT attempts_intent_fkey FOREIGN KEY (delivery_key) REFERENCES intents (delivery_key);
