-- +goose Up
-- The default health thresholds: 3 consecutive definitive failures; more than 10 unknown
-- outcomes within 5 min still unreconciled (a platform answering 5 % of sends with an unknown
-- has a few at a time, one that answers most of them so has more at once); a first probe after
-- 5 s and at most 30 s between probes; and a backoff that doubles. With them an outage of any length costs an account at most the sends in flight
-- when it trips plus one probe per wait, and every intent is sent within a probe's wait of the
-- platform's return.
UPDATE policies SET trip_failures = 3, trip_unknowns = 10, trip_window_seconds = 300, probe_base_ms = 5000,
                    probe_max_ms = 30000, backoff_factor = 2
WHERE scope = '';

-- +goose Down
UPDATE policies SET trip_failures = NULL, trip_unknowns = NULL, trip_window_seconds = NULL, probe_base_ms = NULL,
                    probe_max_ms = NULL, backoff_factor = NULL
WHERE scope = '';
