-- +goose Up
-- Each health field lies in its range, as ledger.SetPolicy checks before the statement runs:
-- trip_unknowns may be 0 (the first unknown outcome trips), a window and a probe's wait are at
-- least 1 of their unit, and the backoff factor lies between 1 (a constant delay) and 10.
ALTER TABLE policies ADD CONSTRAINT policies_health_check CHECK ((trip_failures IS NULL OR trip_failures >= 1) AND (trip_unknowns IS NULL OR trip_unknowns >= 0)
    AND (trip_window_seconds IS NULL OR trip_window_seconds >= 1) AND (probe_base_ms IS NULL OR probe_base_ms >= 1) AND (probe_max_ms IS NULL OR probe_max_ms >= 1)
    AND (backoff_factor IS NULL OR (backoff_factor >= 1 AND backoff_factor <= 10)));

-- +goose Down
ALTER TABLE policies DROP CONSTRAINT policies_health_check;
