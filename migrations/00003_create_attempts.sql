-- +goose Up
-- Append-only: one immutable row per attempt, created by begin() and nothing else. The
-- application role may INSERT and SELECT here, never UPDATE or DELETE (see the grants).
CREATE TABLE attempts (
    attempt_token      BYTEA       NOT NULL,
    delivery_key       BYTEA       NOT NULL,
    account_id         TEXT        NOT NULL,
    action             TEXT        NOT NULL,
    request_hash       BYTEA       NOT NULL,
    credential_version BIGINT      NOT NULL,
    epoch              BIGINT      NOT NULL,
    generation         BIGINT      NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT attempts_pkey PRIMARY KEY (attempt_token),
    CONSTRAINT attempts_fence_key UNIQUE (epoch, generation),
    CONSTRAINT attempts_intent_fkey FOREIGN KEY (delivery_key) REFERENCES intents (delivery_key),
    CONSTRAINT attempts_attempt_token_check CHECK (octet_length(attempt_token) = 16),
    CONSTRAINT attempts_request_hash_check CHECK (octet_length(request_hash) = 32)
);

-- +goose Down
DROP TABLE attempts;
