-- +goose Up
-- The default policy: 3 authorized attempts, backoff from 5 s to 10 min, at most 60
-- authorizations a minute per account in bursts of at most 10 (0 a minute would mean unlimited), a 24 h duplicate-text
-- window, and only the reasons that prove nothing was sent retried automatically.
INSERT INTO policies (scope, attempt_cap, backoff_base_ms, backoff_max_ms, rate_per_minute, rate_burst, text_window_seconds, retryable_reasons, updated_by)
VALUES ('', 3, 5000, 600000, 60, 10, 86400, ARRAY['connection_failed', 'kill_switch', 'rate_limited', 'credential_rotating'], 'migration');

-- +goose Down
DELETE FROM policies WHERE scope = '';
