-- +goose Up
-- A replay asks, for each reject it is about to replay, whether a replay of that reject already
-- stored its intent (control_history rows of kind reject_replay whose scope is the reject's id):
-- through this index it reads that reject's rows, not the whole history.
CREATE INDEX control_history_scope_idx ON control_history (kind, scope, at);

-- +goose Down
DROP INDEX control_history_scope_idx;
