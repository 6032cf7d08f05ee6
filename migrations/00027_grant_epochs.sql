-- +goose Up
GRANT SELECT, INSERT ON epochs TO atmost_app;

-- +goose Down
REVOKE ALL ON epochs FROM atmost_app;
