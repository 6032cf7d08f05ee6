-- +goose Up
-- The control history is an audit trail: the application role (which the operator command
-- also uses) may append to it and read it, never change or delete a row.
GRANT SELECT, INSERT ON control_history TO atmost_app;

-- +goose Down
REVOKE ALL ON control_history FROM atmost_app;
