-- name: SwitchSet :one
-- Turns a kill switch on or off: scope '' is global, any other scope an account id.
INSERT INTO switches (scope, engaged, reason, actor, updated_at)
VALUES (@scope::TEXT, @engaged::BOOL, @reason::TEXT, @actor::TEXT, now())
ON CONFLICT (scope) DO UPDATE SET
    engaged = excluded.engaged,
    reason = excluded.reason,
    actor = excluded.actor,
    updated_at = excluded.updated_at
RETURNING scope, engaged, reason, actor, updated_at;

-- name: SwitchesList :many
SELECT scope, engaged, reason, actor, updated_at FROM switches ORDER BY scope;

-- name: SwitchEngagedFor :one
-- Whether a kill switch stops the account now (its own or the global one): the dispatcher's
-- cheap look before Begin. Authorize checks again.
SELECT EXISTS (SELECT 1 FROM switches WHERE scope IN ('', @account_id::TEXT) AND engaged)::BOOL;

-- name: PolicyEffective :one
-- The policy in force for an account: its own row's columns where set, the default's elsewhere.
SELECT coalesce(p.attempt_cap, d.attempt_cap)::INT AS attempt_cap,
       coalesce(p.backoff_base_ms, d.backoff_base_ms)::BIGINT AS backoff_base_ms,
       coalesce(p.backoff_max_ms, d.backoff_max_ms)::BIGINT AS backoff_max_ms,
       coalesce(p.rate_per_minute, d.rate_per_minute)::INT AS rate_per_minute,
       coalesce(p.rate_burst, d.rate_burst)::INT AS rate_burst,
       coalesce(p.text_window_seconds, d.text_window_seconds)::BIGINT AS text_window_seconds,
       coalesce(p.retryable_reasons, d.retryable_reasons)::TEXT[] AS retryable_reasons
FROM policies d
LEFT JOIN policies p ON p.scope = @scope::TEXT AND @scope::TEXT <> ''
WHERE d.scope = '';

-- name: PolicySet :exec
-- Sets a policy row; NULL columns of an account's row inherit the default. The default row
-- must set every column (a CHECK constraint refuses anything else).
INSERT INTO policies (scope, attempt_cap, backoff_base_ms, backoff_max_ms, rate_per_minute, rate_burst, text_window_seconds, retryable_reasons, updated_by, updated_at)
VALUES (@scope::TEXT, sqlc.narg(attempt_cap)::INT, sqlc.narg(backoff_base_ms)::BIGINT, sqlc.narg(backoff_max_ms)::BIGINT,
        sqlc.narg(rate_per_minute)::INT, sqlc.narg(rate_burst)::INT, sqlc.narg(text_window_seconds)::BIGINT,
        sqlc.narg(retryable_reasons)::TEXT[], @actor::TEXT, now())
ON CONFLICT (scope) DO UPDATE SET
    attempt_cap = excluded.attempt_cap,
    backoff_base_ms = excluded.backoff_base_ms,
    backoff_max_ms = excluded.backoff_max_ms,
    rate_per_minute = excluded.rate_per_minute,
    rate_burst = excluded.rate_burst,
    text_window_seconds = excluded.text_window_seconds,
    retryable_reasons = excluded.retryable_reasons,
    updated_by = excluded.updated_by,
    updated_at = excluded.updated_at;

-- name: SourceHeadAdvance :one
-- A new version of a source becomes its head, superseding whatever the store holds as head:
-- never refused because a head exists, and never jammed by a predecessor that was never
-- stored (what the caller believes it supersedes is not consulted). Returns the head it
-- replaced, NULL for a source seen for the first time.
WITH prior AS (
    SELECT s.head_version FROM source_heads s WHERE s.source_id = @source_id::TEXT FOR UPDATE
),
advanced AS (
    INSERT INTO source_heads (source_id, head_version, raw_hash, previous_version, updated_at)
    VALUES (@source_id::TEXT, @head_version::BYTEA, sqlc.narg(raw_hash)::BYTEA, NULL, now())
    ON CONFLICT (source_id) DO UPDATE SET
        previous_version = source_heads.head_version,
        head_version = excluded.head_version,
        raw_hash = excluded.raw_hash,
        updated_at = excluded.updated_at
    WHERE source_heads.head_version <> excluded.head_version
    RETURNING source_id
)
SELECT (SELECT p.head_version FROM prior p) AS replaced,
       EXISTS (SELECT 1 FROM advanced) AS changed;

-- name: IntentsByState :many
-- An operator's page of intents in one state, in delivery-key order after @after_key.
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at
FROM intents
WHERE state = @state::TEXT AND delivery_key > @after_key::BYTEA
ORDER BY delivery_key
LIMIT @max_rows::INT;
