-- +goose Up
-- A proven not-sent releases its duplicate-text claim by deleting it.
GRANT SELECT, INSERT, UPDATE, DELETE ON text_claims TO atmost_app;

-- +goose Down
REVOKE ALL ON text_claims FROM atmost_app;
