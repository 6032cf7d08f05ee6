-- +goose Up
-- Append-only: what a worker reported about an attempt. A fenced-out worker's late outcome
-- lands here (fenced = true) instead of changing state; the reconciler reads it before it
-- spends its one lookup. outcome is the transport's vocabulary (success, not_sent, unknown) or
-- abandoned for an attempt whose pre-authorization lease expired. attempt_token has no foreign
-- key on purpose: after a ledger restore, a worker of the old epoch may report an attempt the
-- restored ledger never saw, and that evidence must still be kept.
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
    CONSTRAINT attempt_evidence_attempt_token_check CHECK (octet_length(attempt_token) = 16),
    CONSTRAINT attempt_evidence_outcome_check CHECK (outcome IN ('success', 'not_sent', 'unknown', 'abandoned'))
);

-- +goose Down
DROP TABLE attempt_evidence;
