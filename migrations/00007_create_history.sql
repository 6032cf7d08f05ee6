-- +goose Up
-- Append-only: one row per transition, written in the same transaction as the state change.
-- seq numbers an intent's transitions from 1 (creation); the event id derives from
-- (delivery_key, seq). from_state is NULL only for creation.
CREATE TABLE history (
    delivery_key  BYTEA       NOT NULL,
    seq           BIGINT      NOT NULL,
    from_state    TEXT        NULL,
    to_state      TEXT        NOT NULL,
    reason        TEXT        NOT NULL DEFAULT '',
    attempt_token BYTEA       NULL,
    epoch         BIGINT      NULL,
    generation    BIGINT      NULL,
    actor         TEXT        NOT NULL,
    detail        JSONB       NOT NULL DEFAULT '{}',
    at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT history_pkey PRIMARY KEY (delivery_key, seq),
    CONSTRAINT history_intent_fkey FOREIGN KEY (delivery_key) REFERENCES intents (delivery_key),
    CONSTRAINT history_seq_check CHECK (seq >= 1),
    CONSTRAINT history_from_state_check CHECK (from_state IS NULL OR from_state IN ('pending', 'authorized', 'published', 'failed', 'indeterminate', 'parked')),
    CONSTRAINT history_to_state_check CHECK (to_state IN ('pending', 'authorized', 'published', 'failed', 'indeterminate', 'parked')),
    CONSTRAINT history_actor_check CHECK (actor <> '')
);

-- +goose Down
DROP TABLE history;
