-- +goose Up
-- Every change of an account's health (a trip, a probe's verdict, an operator's resume, the
-- unknowns reconciled) is written to the control history: kind health, scope the account, before
-- and after its state, cause and next probe.
ALTER TABLE control_history ADD CONSTRAINT control_history_kind_check CHECK (kind IN ('switch', 'policy', 'epoch', 'account', 'reject_replay', 'operator', 'producer', 'health'));

-- +goose Down
ALTER TABLE control_history DROP CONSTRAINT control_history_kind_check;
