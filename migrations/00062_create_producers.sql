-- +goose Up
-- The producers that may use ingest's HTTP API, each with a token of its own, bound to the
-- accounts it may act for: a token publishes, reads outcomes and streams events for those
-- accounts and no other. Only the token's SHA-256 is kept: the token is 32 random bytes, so its
-- hash cannot be reversed by guessing, and a copy of this table authenticates nobody. A revoked
-- producer keeps its row (its name stays in the history and is never handed out again);
-- revoked_at set means its token no longer works.
CREATE TABLE producers (
    name         TEXT        NOT NULL,
    token_sha256 BYTEA       NOT NULL,
    accounts     TEXT[]      NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at   TIMESTAMPTZ NULL,
    CONSTRAINT producers_pkey PRIMARY KEY (name),
    CONSTRAINT producers_token_sha256_key UNIQUE (token_sha256),
    CONSTRAINT producers_name_check CHECK (name <> ''),
    CONSTRAINT producers_accounts_check CHECK (cardinality(accounts) > 0)
);

-- +goose Down
DROP TABLE producers;
