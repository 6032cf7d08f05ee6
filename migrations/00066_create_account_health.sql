-- +goose Up
-- One row per account whose health has ever changed: serving (sends go ahead), holding (the
-- platform cannot take anything now: no attempt is opened or authorized, the intents wait
-- pending) or probing (one intent, the probe, is let through to learn whether the platform is
-- back). An account without a row is serving. cause says why it holds (platform_unavailable,
-- auth_failed, unknown_outcomes, operator); since is when the state began. failures counts the
-- consecutive definitive failures reported while serving; trips the probes that failed in a row
-- (the next wait grows with it). next_probe_at is when a probe may be let through (NULL: only an
-- operator's resume, or the unknowns reconciled below the threshold, ends the hold). probe_token
-- is the attempt token of the one probe, probe_until the end of its lease: two dispatchers can
-- never both probe. version grows by one on every change, the compare-and-set every change
-- guards on.
CREATE TABLE account_health (
    account_id    TEXT        NOT NULL,
    state         TEXT        NOT NULL DEFAULT 'serving',
    cause         TEXT        NOT NULL DEFAULT '',
    since         TIMESTAMPTZ NOT NULL DEFAULT now(),
    failures      INT         NOT NULL DEFAULT 0,
    trips         INT         NOT NULL DEFAULT 0,
    next_probe_at TIMESTAMPTZ NULL,
    probe_token   BYTEA       NULL,
    probe_until   TIMESTAMPTZ NULL,
    version       BIGINT      NOT NULL DEFAULT 0,
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT account_health_pkey PRIMARY KEY (account_id),
    CONSTRAINT account_health_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (account_id),
    CONSTRAINT account_health_state_check CHECK (state IN ('serving', 'holding', 'probing')),
    CONSTRAINT account_health_cause_check CHECK ((state = 'serving') = (cause = '')),
    CONSTRAINT account_health_probe_check CHECK ((state = 'probing') = (probe_token IS NOT NULL AND probe_until IS NOT NULL)),
    CONSTRAINT account_health_counts_check CHECK (failures >= 0 AND trips >= 0 AND version >= 0)
);

-- +goose Down
DROP TABLE account_health;
