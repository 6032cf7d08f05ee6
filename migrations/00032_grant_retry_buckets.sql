-- +goose Up
GRANT SELECT, INSERT, UPDATE ON retry_buckets TO atmost_app;

-- +goose Down
REVOKE ALL ON retry_buckets FROM atmost_app;
