-- +goose Up
-- Append-only: at most one lookup per attempt whose outcome is unknown. The 'claimed' row is
-- written (and committed) before the lookup; the primary key makes a second claim impossible.
-- The 'resolved' row records what the lookup found.
CREATE TABLE reconciliations (
    attempt_token BYTEA       NOT NULL,
    step          TEXT        NOT NULL,
    delivery_key  BYTEA       NOT NULL,
    result        TEXT        NULL,
    object_id     TEXT        NULL,
    actor         TEXT        NOT NULL,
    detail        JSONB       NOT NULL DEFAULT '{}',
    at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT reconciliations_pkey PRIMARY KEY (attempt_token, step),
    CONSTRAINT reconciliations_attempt_fkey FOREIGN KEY (attempt_token) REFERENCES attempts (attempt_token),
    CONSTRAINT reconciliations_step_check CHECK (step IN ('claimed', 'resolved')),
    CONSTRAINT reconciliations_result_check CHECK ((step = 'claimed' AND result IS NULL) OR (step = 'resolved' AND result IN ('found', 'not_found', 'not_sent', 'unavailable')))
);

-- +goose Down
DROP TABLE reconciliations;
