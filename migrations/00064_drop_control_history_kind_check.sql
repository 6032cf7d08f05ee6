-- +goose Up
-- The control history gains a kind (producer, the next migration): a CHECK constraint is
-- changed by dropping it and adding its successor, one statement each.
ALTER TABLE control_history DROP CONSTRAINT control_history_kind_check;

-- +goose Down
ALTER TABLE control_history ADD CONSTRAINT control_history_kind_check CHECK (kind IN ('switch', 'policy', 'epoch', 'account', 'reject_replay', 'operator'));
