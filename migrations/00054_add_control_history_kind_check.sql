-- +goose Up
-- An operator's replay of a refused message (atmost rejects replay) is a change an operator
-- makes, written to the control history with who and why: kind reject_replay, scope the reject's
-- id, before the reject's reason as stored and after what the replay did with it.
ALTER TABLE control_history ADD CONSTRAINT control_history_kind_check CHECK (kind IN ('switch', 'policy', 'epoch', 'account', 'reject_replay'));

-- +goose Down
ALTER TABLE control_history DROP CONSTRAINT control_history_kind_check;
