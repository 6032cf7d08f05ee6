-- +goose Up
-- The atmost command adds and revokes producers and ingest's HTTP API reads them, both as the
-- application role; no row is ever deleted.
GRANT SELECT, INSERT, UPDATE ON producers TO atmost_app;

-- +goose Down
REVOKE ALL ON producers FROM atmost_app;
