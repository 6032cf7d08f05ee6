-- +goose Up
-- One row per delivery intent, keyed by its content-derived delivery key (32 bytes). The key
-- never changes; state moves only through the guarded transitions of pkg/ledger.
-- attempt_token, epoch and generation name the intent's latest attempt and stay after it ends
-- (the reconciler needs them); lease_expires_at is set only while that attempt holds a lease:
-- pending with a lease is claimed, authorized always has one. attempts_authorized counts the
-- attempts that reached authorization, which is what the attempt cap limits.
CREATE TABLE intents (
    delivery_key        BYTEA       NOT NULL,
    account_id          TEXT        NOT NULL,
    action              TEXT        NOT NULL,
    target              TEXT        NOT NULL DEFAULT '',
    request             TEXT        NOT NULL,
    occurrence          TEXT        NOT NULL DEFAULT '',
    text_hash           BYTEA       NULL,
    source_id           TEXT        NULL,
    source_version      BYTEA       NULL,
    state               TEXT        NOT NULL DEFAULT 'pending',
    reason              TEXT        NOT NULL DEFAULT '',
    transition_seq      BIGINT      NOT NULL DEFAULT 1,
    attempts_authorized INT         NOT NULL DEFAULT 0,
    attempt_token       BYTEA       NULL,
    epoch               BIGINT      NULL,
    generation          BIGINT      NULL,
    lease_expires_at    TIMESTAMPTZ NULL,
    object_id           TEXT        NULL,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT intents_pkey PRIMARY KEY (delivery_key),
    CONSTRAINT intents_account_fkey FOREIGN KEY (account_id) REFERENCES accounts (account_id),
    CONSTRAINT intents_delivery_key_check CHECK (octet_length(delivery_key) = 32),
    CONSTRAINT intents_state_check CHECK (state IN ('pending', 'authorized', 'published', 'failed', 'indeterminate', 'parked')),
    CONSTRAINT intents_text_hash_check CHECK (text_hash IS NULL OR octet_length(text_hash) = 32),
    CONSTRAINT intents_source_check CHECK ((source_id IS NULL) = (source_version IS NULL)),
    CONSTRAINT intents_transition_seq_check CHECK (transition_seq >= 1),
    CONSTRAINT intents_attempts_authorized_check CHECK (attempts_authorized >= 0),
    CONSTRAINT intents_lease_state_check CHECK (lease_expires_at IS NULL OR state IN ('pending', 'authorized')),
    CONSTRAINT intents_authorized_claim_check CHECK (state <> 'authorized' OR (attempt_token IS NOT NULL AND epoch IS NOT NULL AND generation IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- +goose Down
DROP TABLE intents;
