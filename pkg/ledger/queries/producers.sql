-- The producers of ingest's HTTP API. Adding and revoking one is written to control_history
-- (kind 'producer', scope the name) in the statement that makes it; before and after hold its
-- accounts and whether it is revoked, never the token's hash.

-- name: ProducerAdd :many
-- Adds a producer with its token's hash and its accounts; a name that exists, revoked or not,
-- is left alone and nothing is recorded (no row back).
WITH added AS (
    INSERT INTO producers (name, token_sha256, accounts)
    VALUES (@name::TEXT, @token_sha256::BYTEA, @accounts::TEXT[])
    ON CONFLICT (name) DO NOTHING
    RETURNING name, accounts, created_at, revoked_at
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'producer', a.name, @actor::TEXT, @reason::TEXT, NULL,
           jsonb_build_object('accounts', to_jsonb(a.accounts), 'revoked', false)
    FROM added a
    RETURNING control_id
)
SELECT name, accounts, created_at, revoked_at
FROM added;

-- name: ProducerRevoke :many
-- Revokes a producer that is not revoked yet, and records it; no row back otherwise.
WITH revoked AS (
    UPDATE producers
    SET revoked_at = now()
    WHERE name = @name::TEXT AND revoked_at IS NULL
    RETURNING name, accounts, created_at, revoked_at
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'producer', r.name, @actor::TEXT, @reason::TEXT,
           jsonb_build_object('accounts', to_jsonb(r.accounts), 'revoked', false),
           jsonb_build_object('accounts', to_jsonb(r.accounts), 'revoked', true)
    FROM revoked r
    RETURNING control_id
)
SELECT name, accounts, created_at, revoked_at
FROM revoked;

-- name: ProducersList :many
SELECT name, accounts, created_at, revoked_at
FROM producers
ORDER BY name;

-- name: ProducerGet :many
SELECT name, accounts, created_at, revoked_at
FROM producers
WHERE name = @name::TEXT;

-- name: ProducerByToken :many
-- The producer a token's hash names, if it is not revoked, with its hash for the caller's
-- constant-time comparison: read on every HTTP request, so that a revocation takes effect at
-- once.
SELECT name, accounts, token_sha256
FROM producers
WHERE token_sha256 = @token_sha256::BYTEA AND revoked_at IS NULL;
