-- +goose Up
-- The control history takes a fourth kind, account changes (migration 50 adds the check again
-- with it). The check is dropped and added in two migrations because each holds one statement,
-- and an ALTER that drops and adds a constraint of one name is not something PostgreSQL and
-- CockroachDB agree on.
ALTER TABLE control_history DROP CONSTRAINT control_history_kind_check;

-- +goose Down
ALTER TABLE control_history ADD CONSTRAINT control_history_kind_check CHECK (kind IN ('switch', 'policy', 'epoch'));
