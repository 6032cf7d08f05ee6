-- name: AccountInsert :execrows
-- Configures a new account; an existing one is left alone (zero rows).
INSERT INTO accounts (account_id, platform, settings, credential_ref, contract_version)
VALUES (@account_id::TEXT, @platform::TEXT, @settings::JSONB, @credential_ref::TEXT, @contract_version::TEXT)
ON CONFLICT (account_id) DO NOTHING;

-- name: AccountsList :many
SELECT account_id, platform, settings, credential_ref, credential_version, revoked, contract_version, created_at, updated_at
FROM accounts
ORDER BY account_id;

-- name: AccountRotate :one
-- A new credential: the version moves on, so every attempt opened with the old one is refused
-- at authorization (credential_rotating); a revoked account is usable again.
UPDATE accounts SET
    credential_ref = coalesce(sqlc.narg(credential_ref)::TEXT, credential_ref),
    credential_version = credential_version + 1,
    revoked = false,
    updated_at = now()
WHERE account_id = @account_id::TEXT
RETURNING credential_version;

-- name: AccountRevoke :one
-- Stops the account's credential: every authorization is refused (credential_revoked) until a
-- rotation.
UPDATE accounts SET
    revoked = true,
    credential_version = credential_version + 1,
    updated_at = now()
WHERE account_id = @account_id::TEXT
RETURNING credential_version;
