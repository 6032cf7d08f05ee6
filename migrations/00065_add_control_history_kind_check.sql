-- +goose Up
-- Adding and revoking a producer of the HTTP API (atmost producers add, revoke) is written to
-- the control history with who and why: kind producer, scope the producer's name, before and
-- after its accounts and whether it is revoked (never its token or the token's hash).
ALTER TABLE control_history ADD CONSTRAINT control_history_kind_check CHECK (kind IN ('switch', 'policy', 'epoch', 'account', 'reject_replay', 'operator', 'producer'));

-- +goose Down
ALTER TABLE control_history DROP CONSTRAINT control_history_kind_check;
