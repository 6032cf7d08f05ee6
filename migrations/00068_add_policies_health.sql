-- +goose Up
-- The health thresholds and the backoff's growth, policy fields like the others (NULL on an
-- account's row inherits the default's): trip_failures consecutive definitive failures that say
-- the platform cannot take anything now hold the account; more than trip_unknowns unknown
-- outcomes within trip_window_seconds hold it too; a holding account is probed after
-- probe_base_ms, each failed probe multiplying the wait by backoff_factor up to probe_max_ms;
-- a failed intent is retried after backoff_base_ms * backoff_factor^(attempts - 1), at most
-- backoff_max_ms, with jitter.
ALTER TABLE policies
    ADD COLUMN trip_failures INT NULL,
    ADD COLUMN trip_unknowns INT NULL,
    ADD COLUMN trip_window_seconds BIGINT NULL,
    ADD COLUMN probe_base_ms BIGINT NULL,
    ADD COLUMN probe_max_ms BIGINT NULL,
    ADD COLUMN backoff_factor DOUBLE PRECISION NULL;

-- +goose Down
ALTER TABLE policies
    DROP COLUMN trip_failures,
    DROP COLUMN trip_unknowns,
    DROP COLUMN trip_window_seconds,
    DROP COLUMN probe_base_ms,
    DROP COLUMN probe_max_ms,
    DROP COLUMN backoff_factor;
