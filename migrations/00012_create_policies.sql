-- +goose Up
-- Attempt caps, retry backoff, rate limits (a token bucket per account: rate_per_minute tokens
-- a minute, at most rate_burst at once; 0 a minute means unlimited) and the duplicate-text window. scope '' is the
-- default row for every account (every column set); an account's own row overrides the
-- columns it sets (NULL inherits). Account ids are 1-128 bytes, so '' never names one.
CREATE TABLE policies (
    scope                 TEXT        NOT NULL,
    attempt_cap           INT         NULL,
    backoff_base_ms       BIGINT      NULL,
    backoff_max_ms        BIGINT      NULL,
    rate_per_minute       INT         NULL,
    rate_burst            INT         NULL,
    text_window_seconds   BIGINT      NULL,
    retryable_reasons     TEXT[]      NULL,
    updated_by            TEXT        NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT policies_pkey PRIMARY KEY (scope),
    CONSTRAINT policies_default_complete_check CHECK (scope <> '' OR (attempt_cap IS NOT NULL AND backoff_base_ms IS NOT NULL AND backoff_max_ms IS NOT NULL AND rate_per_minute IS NOT NULL AND rate_burst IS NOT NULL AND text_window_seconds IS NOT NULL AND retryable_reasons IS NOT NULL)),
    CONSTRAINT policies_attempt_cap_check CHECK (attempt_cap IS NULL OR attempt_cap >= 1),
    CONSTRAINT policies_backoff_check CHECK ((backoff_base_ms IS NULL OR backoff_base_ms >= 0) AND (backoff_max_ms IS NULL OR backoff_max_ms >= 0)),
    CONSTRAINT policies_rate_check CHECK ((rate_per_minute IS NULL OR rate_per_minute >= 0) AND (rate_burst IS NULL OR rate_burst >= 1)),
    CONSTRAINT policies_text_window_check CHECK (text_window_seconds IS NULL OR text_window_seconds >= 0)
);

-- +goose Down
DROP TABLE policies;
