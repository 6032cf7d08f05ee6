-- +goose Up
-- Append-only: what a worker reported about an attempt. A fenced-out worker's late outcome
-- lands here (fenced = true) instead of changing state; the reconciler reads it before it
-- spends its one lookup. outcome is the transport's vocabulary (success, not_sent, unknown) or
-- abandoned for an attempt whose pre-authorization lease expired.
CREATE TABLE attempt_evidence (
    evidence_id   UUID        NOT NULL DEFAULT gen_random_uuid(),
    attempt_token BYTEA       NOT NULL,
    delivery_key  BYTEA       NOT NULL,
    epoch         BIGINT      NOT NULL,
    generation    BIGINT      NOT NULL,
    outcome       TEXT        NOT NULL,
    reason        TEXT        NOT NULL DEFAULT '',
    object_id     TEXT        NULL,
    fenced        BOOL        NOT NULL,
    detail        JSONB       NOT NULL DEFAULT '{}',
    recorded_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT attempt_evidence_pkey PRIMARY KEY (evidence_id),
    CONSTRAINT attempt_evidence_attempt_fkey FOREIGN KEY (attempt_token) REFERENCES attempts (attempt_token),
    CONSTRAINT attempt_evidence_outcome_check CHECK (outcome IN ('success', 'not_sent', 'unknown', 'abandoned'))
);

-- +goose Down
DROP TABLE attempt_evidence;
