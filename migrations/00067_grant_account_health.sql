-- +goose Up
GRANT SELECT, INSERT, UPDATE ON account_health TO atmost_app;

-- +goose Down
REVOKE ALL ON account_health FROM atmost_app;
