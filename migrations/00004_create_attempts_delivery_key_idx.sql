-- +goose Up
CREATE INDEX attempts_delivery_key_idx ON attempts (delivery_key, generation);

-- +goose Down
DROP INDEX attempts_delivery_key_idx;
