-- The console's operators. Adding and revoking one is written to control_history (kind
-- 'operator', scope the name) in the statement that makes it; before and after hold its role
-- and whether it is revoked, never the token's hash.

-- name: OperatorAdd :many
-- Adds an operator with its token's hash; a name that exists, revoked or not, is left alone
-- and nothing is recorded (no row back).
WITH added AS (
    INSERT INTO operators (name, role, token_sha256)
    VALUES (@name::TEXT, @role::TEXT, @token_sha256::BYTEA)
    ON CONFLICT (name) DO NOTHING
    RETURNING name, role, created_at, revoked_at
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'operator', a.name, @actor::TEXT, @reason::TEXT, NULL,
           jsonb_build_object('role', a.role, 'revoked', false)
    FROM added a
    RETURNING control_id
)
SELECT name, role, created_at, revoked_at
FROM added;

-- name: OperatorRevoke :many
-- Revokes an operator that is not revoked yet, and records it; no row back otherwise.
WITH revoked AS (
    UPDATE operators
    SET revoked_at = now()
    WHERE name = @name::TEXT AND revoked_at IS NULL
    RETURNING name, role, created_at, revoked_at
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'operator', r.name, @actor::TEXT, @reason::TEXT,
           jsonb_build_object('role', r.role, 'revoked', false),
           jsonb_build_object('role', r.role, 'revoked', true)
    FROM revoked r
    RETURNING control_id
)
SELECT name, role, created_at, revoked_at
FROM revoked;

-- name: OperatorsList :many
SELECT name, role, created_at, revoked_at
FROM operators
ORDER BY name;

-- name: OperatorGet :many
SELECT name, role, created_at, revoked_at
FROM operators
WHERE name = @name::TEXT;

-- name: OperatorByToken :many
-- The operator a token's hash names, if it is not revoked: read on every console request, so
-- that a revocation ends its sessions at once.
SELECT name, role
FROM operators
WHERE token_sha256 = @token_sha256::BYTEA AND revoked_at IS NULL;
