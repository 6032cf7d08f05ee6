-- +goose Up
-- The default policy row sets every field, the health fields (migration 00068) included; an
-- account's NULL inherits the default's.
ALTER TABLE policies ADD CONSTRAINT policies_default_complete_check CHECK (scope <> '' OR (attempt_cap IS NOT NULL AND backoff_base_ms IS NOT NULL AND backoff_max_ms IS NOT NULL AND rate_per_minute IS NOT NULL AND rate_burst IS NOT NULL AND text_window_seconds IS NOT NULL AND retryable_reasons IS NOT NULL
    AND trip_failures IS NOT NULL AND trip_unknowns IS NOT NULL AND trip_window_seconds IS NOT NULL AND probe_base_ms IS NOT NULL AND probe_max_ms IS NOT NULL AND backoff_factor IS NOT NULL));

-- +goose Down
ALTER TABLE policies DROP CONSTRAINT policies_default_complete_check;
