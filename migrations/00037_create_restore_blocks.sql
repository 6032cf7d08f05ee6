-- +goose Up
-- Delivery keys that `atmost restore reconcile` found on ATMOST_EVENTS but could not recreate in
-- a restored ledger (the producer's envelope aged out of ATMOST_INTENTS, or the ledger lacks the
-- account). The stream shows the intent existed, and it may have been sent: Submit reports a
-- blocked key as a duplicate, so a producer publishing it again never creates a pending intent
-- for it. Only a human lifts a block (DELETE, as the schema owner); a later restore run that can
-- recreate the intent (its account re-added) still does, and the intent then blocks the key.
CREATE TABLE restore_blocks (
    delivery_key BYTEA       NOT NULL,
    account_id   TEXT        NOT NULL,
    reason       TEXT        NOT NULL,
    actor        TEXT        NOT NULL,
    stream_seq   BIGINT      NOT NULL,
    stream_state TEXT        NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT restore_blocks_pkey PRIMARY KEY (delivery_key),
    CONSTRAINT restore_blocks_delivery_key_check CHECK (octet_length(delivery_key) = 32),
    CONSTRAINT restore_blocks_reason_check CHECK (reason IN ('no_envelope', 'unknown_account')),
    CONSTRAINT restore_blocks_actor_check CHECK (actor <> '')
);

-- +goose Down
DROP TABLE restore_blocks;
