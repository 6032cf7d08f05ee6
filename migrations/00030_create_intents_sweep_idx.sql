-- +goose Up
-- The sweeper and the reconciler find their work through this index: pending intents whose
-- work item may be lost, failed intents due for a retry, indeterminate intents to reconcile or
-- park, each by state, reason and age. Published, authorized and parked intents are not in it,
-- so it stays as small as the intents that may still move.
CREATE INDEX intents_sweep_idx ON intents (state, reason, updated_at) WHERE state IN ('pending', 'failed', 'indeterminate');

-- +goose Down
DROP INDEX intents_sweep_idx;
