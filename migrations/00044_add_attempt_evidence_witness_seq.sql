-- +goose Up
-- The stream sequence JetStream named when it acknowledged the attempt's authorized event on
-- ATMOST_EVENTS, before the first byte (for a duplicate publish, the sequence of the copy it
-- already held). A restored ledger that holds the attempt published names with it one exact
-- message stored before its backup: the point `atmost restore reconcile` replays from. NULL
-- where the worker had no acknowledgement, and in rows written before this column.
ALTER TABLE attempt_evidence ADD COLUMN witness_seq BIGINT NULL;

-- +goose Down
ALTER TABLE attempt_evidence DROP COLUMN witness_seq;
