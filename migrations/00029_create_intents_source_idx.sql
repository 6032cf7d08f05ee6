-- +goose Up
-- Submit asks whether a source version was seen before it lets it become the head.
CREATE INDEX intents_source_idx ON intents (source_id, source_version) WHERE source_id IS NOT NULL;

-- +goose Down
DROP INDEX intents_source_idx;
