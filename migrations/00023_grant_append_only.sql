-- +goose Up
-- The application role may only append to and read the audit tables: attempts, evidence,
-- history, reconciliations and rejects are insert-only for it.
GRANT SELECT, INSERT ON attempts, attempt_evidence, history, reconciliations, rejects TO atmost_app;

-- +goose Down
REVOKE ALL ON attempts, attempt_evidence, history, reconciliations, rejects FROM atmost_app;
