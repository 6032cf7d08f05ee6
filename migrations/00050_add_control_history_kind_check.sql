-- +goose Up
-- Account changes (add, update, disable, enable, rotate, revoke) are written to the control
-- history in the statement that makes them, as switch, policy and epoch changes are.
ALTER TABLE control_history ADD CONSTRAINT control_history_kind_check CHECK (kind IN ('switch', 'policy', 'epoch', 'account'));

-- +goose Down
ALTER TABLE control_history DROP CONSTRAINT control_history_kind_check;
