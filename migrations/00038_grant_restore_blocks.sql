-- +goose Up
-- The application role (which the operator command also uses) may add a block and read them;
-- lifting one is a human's decision, made as the schema owner.
GRANT SELECT, INSERT ON restore_blocks TO atmost_app;

-- +goose Down
REVOKE ALL ON restore_blocks FROM atmost_app;
