-- +goose Up
-- The default policy row sets every field, the health fields too: the CHECK that says so is
-- dropped here and added again with them by the next migration.
ALTER TABLE policies DROP CONSTRAINT policies_default_complete_check;

-- +goose Down
ALTER TABLE policies ADD CONSTRAINT policies_default_complete_check CHECK (scope <> '' OR (attempt_cap IS NOT NULL AND backoff_base_ms IS NOT NULL AND backoff_max_ms IS NOT NULL AND rate_per_minute IS NOT NULL AND rate_burst IS NOT NULL AND text_window_seconds IS NOT NULL AND retryable_reasons IS NOT NULL));
