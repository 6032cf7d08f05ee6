-- +goose Up
-- The duplicate-text exclusion window per account: a claim is taken at authorization with
-- INSERT ... ON CONFLICT (account_id, text_hash) DO UPDATE ... WHERE last_at <= now() - window,
-- and released only by a proven not-sent.
CREATE TABLE text_claims (
    account_id   TEXT        NOT NULL,
    text_hash    BYTEA       NOT NULL,
    delivery_key BYTEA       NOT NULL,
    last_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT text_claims_pkey PRIMARY KEY (account_id, text_hash),
    CONSTRAINT text_claims_text_hash_check CHECK (octet_length(text_hash) = 32)
);

-- +goose Down
DROP TABLE text_claims;
