-- +goose Up
-- The people who may use the console, each with a token of their own: the console records a
-- change under the name of the operator whose token logged in (console:NAME), never under a
-- name the visitor types. Only the token's SHA-256 is kept: the token is 32 random bytes, so
-- its hash cannot be reversed by guessing, and a copy of this table logs nobody in. A revoked
-- operator keeps its row (its name stays in the history, and is never handed out again);
-- revoked_at set means its token and every session it opened no longer work.
CREATE TABLE operators (
    name         TEXT        NOT NULL,
    role         TEXT        NOT NULL,
    token_sha256 BYTEA       NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    revoked_at   TIMESTAMPTZ NULL,
    CONSTRAINT operators_pkey PRIMARY KEY (name),
    CONSTRAINT operators_token_sha256_key UNIQUE (token_sha256),
    CONSTRAINT operators_role_check CHECK (role IN ('viewer', 'operator')),
    CONSTRAINT operators_name_check CHECK (name <> '')
);

-- +goose Down
DROP TABLE operators;
