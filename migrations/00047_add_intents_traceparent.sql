-- +goose Up
-- The W3C traceparent of the step that stored the intent (ingest's store span, continuing the
-- producer's trace from the message's headers), so that the relay carries the trace on the
-- intent's work items and events and the reconciler continues it. Tracing only: no delivery
-- key, request hash or guard reads it. NULL when the producer sent none and ingest traced
-- nothing, and in rows written before this column.
ALTER TABLE intents ADD COLUMN traceparent TEXT NULL;

-- +goose Down
ALTER TABLE intents DROP COLUMN traceparent;
