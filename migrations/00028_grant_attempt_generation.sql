-- +goose Up
GRANT USAGE, SELECT ON SEQUENCE attempt_generation TO atmost_app;

-- +goose Down
REVOKE ALL ON SEQUENCE attempt_generation FROM atmost_app;
