-- +goose Up
GRANT SELECT, INSERT, DELETE ON outbox TO atmost_app;

-- +goose Down
REVOKE ALL ON outbox FROM atmost_app;
