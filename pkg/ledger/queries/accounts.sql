-- Every change to an account is written to control_history (kind 'account', scope the account
-- id) in the statement that makes it, with the operator and the reason. before and after hold
-- the account's settable columns (platform, settings, credential_ref, credential_version,
-- revoked, disabled, contract_version); before is NULL for the change that added the account.

-- name: AccountAdd :many
-- Configures a new account and records it; an existing one is left alone and nothing is
-- recorded (no row back).
WITH added AS (
    INSERT INTO accounts (account_id, platform, settings, credential_ref, contract_version)
    VALUES (@account_id::TEXT, @platform::TEXT, @settings::JSONB, @credential_ref::TEXT, @contract_version::TEXT)
    ON CONFLICT (account_id) DO NOTHING
    RETURNING account_id, platform, settings, credential_ref, credential_version, revoked, disabled, contract_version, created_at, updated_at
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'account', a.account_id, @actor::TEXT, @reason::TEXT, NULL,
           jsonb_build_object('platform', a.platform, 'settings', a.settings, 'credential_ref', a.credential_ref,
                              'credential_version', a.credential_version, 'revoked', a.revoked, 'disabled', a.disabled,
                              'contract_version', a.contract_version)
    FROM added a
    RETURNING control_id
)
SELECT account_id, platform, settings, credential_ref, credential_version, revoked, disabled, contract_version, created_at, updated_at
FROM added;

-- name: AccountsList :many
SELECT account_id, platform, settings, credential_ref, credential_version, revoked, disabled, contract_version, created_at, updated_at
FROM accounts
ORDER BY account_id;

-- name: AccountGet :many
SELECT account_id, platform, settings, credential_ref, credential_version, revoked, disabled, contract_version, created_at, updated_at
FROM accounts
WHERE account_id = @account_id::TEXT;

-- name: AccountChange :one
-- Changes one account and records the change: platform, settings and the pinned contract (update), the
-- operator's stop (disable, enable), the credential (rotate: a new reference or the same one,
-- a new version, no longer revoked; revoke). A NULL argument keeps the column. known is false
-- for an account that is not configured; busy is true, with nothing changed, when the change
-- would open the adapter otherwise (another platform or settings) while an intent of the account is authorized or
-- indeterminate: its bytes may have left under the old settings, and its one lookup must ask
-- where they went, not where the new settings point. Every change of platform, settings or
-- credential moves credential_version on, so an attempt opened with the adapter as it was is refused at
-- authorization (credential_rotating) and the dispatcher opens the adapter again.
WITH prior AS (
    SELECT a.account_id, a.platform, a.settings, a.credential_ref, a.credential_version, a.revoked, a.disabled, a.contract_version,
           a.updated_at
    FROM accounts a
    WHERE a.account_id = @account_id::TEXT
    FOR UPDATE
),
plan AS (
    SELECT p.*, x.adapter_change,
           (@rotate::BOOL OR @revoke::BOOL OR x.adapter_change)::BOOL AS new_version,
           (x.adapter_change
            AND (EXISTS (SELECT 1 FROM intents i WHERE i.account_id = p.account_id AND i.state = 'indeterminate')
                 OR EXISTS (SELECT 1 FROM intents i WHERE i.account_id = p.account_id AND i.lease_expires_at IS NOT NULL AND i.state = 'authorized')))::BOOL AS busy
    FROM prior p
    CROSS JOIN LATERAL (
        SELECT ((sqlc.narg(platform)::TEXT IS NOT NULL AND sqlc.narg(platform)::TEXT <> p.platform)
                OR (sqlc.narg(settings)::JSONB IS NOT NULL AND sqlc.narg(settings)::JSONB <> p.settings))::BOOL AS adapter_change
    ) x
),
changed AS (
    UPDATE accounts a SET
        platform = coalesce(sqlc.narg(platform)::TEXT, a.platform),
        settings = coalesce(sqlc.narg(settings)::JSONB, a.settings),
        contract_version = coalesce(sqlc.narg(contract_version)::TEXT, a.contract_version),
        credential_ref = coalesce(sqlc.narg(credential_ref)::TEXT, a.credential_ref),
        credential_version = a.credential_version + (CASE WHEN pl.new_version THEN 1 ELSE 0 END),
        revoked = (CASE WHEN @revoke::BOOL THEN true WHEN @rotate::BOOL THEN false ELSE a.revoked END),
        disabled = coalesce(sqlc.narg(disabled)::BOOL, a.disabled),
        updated_at = now()
    FROM plan pl
    WHERE a.account_id = pl.account_id
      -- The guard: the adapter is not changed under an intent whose bytes may have left.
      AND NOT pl.busy
    RETURNING a.account_id, a.platform, a.settings, a.credential_ref, a.credential_version, a.revoked, a.disabled, a.contract_version, a.created_at, a.updated_at
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'account', c.account_id, @actor::TEXT, @reason::TEXT,
           (SELECT jsonb_build_object('platform', p.platform, 'settings', p.settings, 'credential_ref', p.credential_ref,
                                      'credential_version', p.credential_version, 'revoked', p.revoked, 'disabled', p.disabled,
                                      'contract_version', p.contract_version) FROM prior p),
           jsonb_build_object('platform', c.platform, 'settings', c.settings, 'credential_ref', c.credential_ref,
                              'credential_version', c.credential_version, 'revoked', c.revoked, 'disabled', c.disabled,
                              'contract_version', c.contract_version)
    FROM changed c
    RETURNING control_id
)
SELECT EXISTS (SELECT 1 FROM prior)::BOOL AS known,
       coalesce((SELECT pl.busy FROM plan pl), false)::BOOL AS busy,
       EXISTS (SELECT 1 FROM changed)::BOOL AS changed,
       p.platform AS before_platform, p.settings AS before_settings, p.credential_ref AS before_credential_ref,
       p.credential_version AS before_credential_version, p.revoked AS before_revoked, p.disabled AS before_disabled,
       p.contract_version AS before_contract_version, p.updated_at AS before_updated_at,
       c.account_id, c.platform, c.settings, c.credential_ref, c.credential_version, c.revoked, c.disabled, c.contract_version,
       c.created_at, c.updated_at
FROM (SELECT 1) one
LEFT JOIN prior p ON true
LEFT JOIN changed c ON true;

-- name: AccountHolds :many
-- The gates that hold every intent of an account now, in the order Authorize checks them, with
-- the operator change that set each: an engaged kill switch (own: the account's, global: every
-- account's), the account disabled, its credential revoked. The change that disabled or revoked
-- is the latest control_history row that turned the flag on; an account revoked before its
-- changes were recorded has none (NULL). Then its health: holding or probing, with its cause,
-- since when and the next probe. An empty @account_ids means every account.
SELECT a.account_id, a.disabled, a.revoked,
       own.actor AS own_switch_actor, own.reason AS own_switch_reason, own.updated_at AS own_switch_at,
       glob.actor AS global_switch_actor, glob.reason AS global_switch_reason, glob.updated_at AS global_switch_at,
       dis.actor AS disabled_actor, dis.reason AS disabled_reason, dis.at AS disabled_at,
       rev.actor AS revoked_actor, rev.reason AS revoked_reason, rev.at AS revoked_at,
       h.state AS health_state, h.cause AS health_cause, h.since AS health_since,
       h.next_probe_at AS health_next_probe_at, h.probe_until AS health_probe_until
FROM accounts a
LEFT JOIN switches own ON own.scope = a.account_id AND own.engaged
LEFT JOIN switches glob ON glob.scope = '' AND glob.engaged
LEFT JOIN account_health h ON h.account_id = a.account_id AND h.state <> 'serving'
LEFT JOIN control_history dis ON a.disabled AND dis.kind = 'account' AND dis.scope = a.account_id
    AND (dis.after ->> 'disabled') = 'true' AND coalesce(dis.before ->> 'disabled', 'false') = 'false'
    AND NOT EXISTS (SELECT 1 FROM control_history x
                    WHERE x.kind = 'account' AND x.scope = a.account_id AND (x.at, x.control_id) > (dis.at, dis.control_id)
                      AND (x.after ->> 'disabled') = 'true' AND coalesce(x.before ->> 'disabled', 'false') = 'false')
LEFT JOIN control_history rev ON a.revoked AND rev.kind = 'account' AND rev.scope = a.account_id
    AND (rev.after ->> 'revoked') = 'true' AND coalesce(rev.before ->> 'revoked', 'false') = 'false'
    AND NOT EXISTS (SELECT 1 FROM control_history x
                    WHERE x.kind = 'account' AND x.scope = a.account_id AND (x.at, x.control_id) > (rev.at, rev.control_id)
                      AND (x.after ->> 'revoked') = 'true' AND coalesce(x.before ->> 'revoked', 'false') = 'false')
WHERE (cardinality(@account_ids::TEXT[]) = 0 OR a.account_id = ANY(@account_ids::TEXT[]))
  AND (own.scope IS NOT NULL OR glob.scope IS NOT NULL OR a.disabled OR a.revoked OR h.account_id IS NOT NULL)
ORDER BY a.account_id;

-- name: AccountsPending :many
-- How many intents of each of the accounts are pending, through intents_sweep_idx.
SELECT i.account_id, count(*)::BIGINT AS pending
FROM intents i
WHERE i.state = 'pending' AND i.account_id = ANY(@account_ids::TEXT[])
GROUP BY i.account_id
ORDER BY i.account_id;
