-- +goose Up
CREATE INDEX outbox_created_at_idx ON outbox (created_at);

-- +goose Down
DROP INDEX outbox_created_at_idx;
