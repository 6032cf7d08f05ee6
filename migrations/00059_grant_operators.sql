-- +goose Up
-- The atmost command adds and revokes operators and the console reads them, both as the
-- application role; no row is ever deleted.
GRANT SELECT, INSERT, UPDATE ON operators TO atmost_app;

-- +goose Down
REVOKE ALL ON operators FROM atmost_app;
