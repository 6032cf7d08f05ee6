-- +goose Up
-- Adding and revoking a console operator (atmost operators add, revoke) is written to the
-- control history with who and why: kind operator, scope the operator's name, before and after
-- its role and whether it is revoked (never its token or the token's hash).
ALTER TABLE control_history ADD CONSTRAINT control_history_kind_check CHECK (kind IN ('switch', 'policy', 'epoch', 'account', 'reject_replay', 'operator'));

-- +goose Down
ALTER TABLE control_history DROP CONSTRAINT control_history_kind_check;
