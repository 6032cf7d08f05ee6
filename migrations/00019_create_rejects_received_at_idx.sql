-- +goose Up
CREATE INDEX rejects_received_at_idx ON rejects (received_at);

-- +goose Down
DROP INDEX rejects_received_at_idx;
