-- name: SwitchSet :one
-- Turns a kill switch on or off and appends the change to control_history in the same
-- statement: the empty scope is the global switch, any other scope a configured account's id. known is
-- false for an account that is not configured (nothing is written). changed is false, with
-- nothing written, when the switch was created by another statement since this one's snapshot
-- (READ COMMITTED only; SERIALIZABLE fails with 40001 instead): the history must never record a
-- before that was not the row replaced.
WITH account AS (
    SELECT (@scope::TEXT = '' OR EXISTS (SELECT 1 FROM accounts a WHERE a.account_id = @scope::TEXT))::BOOL AS known
),
prior AS (
    SELECT s.scope, s.engaged, s.reason, s.actor, s.updated_at
    FROM switches s
    WHERE s.scope = @scope::TEXT
    FOR UPDATE
),
changed AS (
    INSERT INTO switches (scope, engaged, reason, actor, updated_at)
    SELECT @scope::TEXT, @engaged::BOOL, @reason::TEXT, @actor::TEXT, now()
    FROM account
    WHERE account.known
    ON CONFLICT (scope) DO UPDATE SET
        engaged = excluded.engaged,
        reason = excluded.reason,
        actor = excluded.actor,
        updated_at = excluded.updated_at
    -- The guard: only the row this statement read and locked is replaced.
    WHERE EXISTS (SELECT 1 FROM prior)
    RETURNING scope, engaged, reason, actor, updated_at
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'switch', c.scope, c.actor, c.reason,
           (SELECT jsonb_build_object('engaged', p.engaged, 'reason', p.reason) FROM prior p),
           jsonb_build_object('engaged', c.engaged, 'reason', c.reason)
    FROM changed c
    RETURNING control_id
)
SELECT a.known,
       (c.scope IS NOT NULL)::BOOL AS changed,
       p.engaged AS before_engaged, p.reason AS before_reason, p.actor AS before_actor, p.updated_at AS before_updated_at,
       c.engaged AS after_engaged, c.updated_at AS after_updated_at
FROM account a
LEFT JOIN prior p ON true
LEFT JOIN changed c ON true;

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
       coalesce(p.retryable_reasons, d.retryable_reasons)::TEXT[] AS retryable_reasons,
       coalesce(p.backoff_factor, d.backoff_factor)::DOUBLE PRECISION AS backoff_factor,
       coalesce(p.trip_failures, d.trip_failures)::INT AS trip_failures,
       coalesce(p.trip_unknowns, d.trip_unknowns)::INT AS trip_unknowns,
       coalesce(p.trip_window_seconds, d.trip_window_seconds)::BIGINT AS trip_window_seconds,
       coalesce(p.probe_base_ms, d.probe_base_ms)::BIGINT AS probe_base_ms,
       coalesce(p.probe_max_ms, d.probe_max_ms)::BIGINT AS probe_max_ms
FROM policies d
LEFT JOIN policies p ON p.scope = @scope::TEXT AND @scope::TEXT <> ''
WHERE d.scope = '';

-- name: PolicySet :one
-- Changes some columns of a policy row and appends the change to control_history in the same
-- statement. A column whose set_ flag is true takes the given value (NULL: an account's row
-- inherits the default's); every other column keeps the value of the row as locked here, so two
-- operators changing different columns never undo each other. The default row (the empty scope) must
-- keep every column set (a CHECK constraint refuses anything else). known and changed mean what
-- they mean for SwitchSet. before is NULL when the account had no row of its own.
WITH account AS (
    SELECT (@scope::TEXT = '' OR EXISTS (SELECT 1 FROM accounts a WHERE a.account_id = @scope::TEXT))::BOOL AS known
),
prior AS (
    SELECT p.scope, p.attempt_cap, p.backoff_base_ms, p.backoff_max_ms, p.rate_per_minute, p.rate_burst,
           p.text_window_seconds, p.retryable_reasons, p.trip_failures, p.trip_unknowns, p.trip_window_seconds,
           p.probe_base_ms, p.probe_max_ms, p.backoff_factor
    FROM policies p
    WHERE p.scope = @scope::TEXT
    FOR UPDATE
),
merged AS (
    SELECT
           CASE WHEN @set_attempt_cap::BOOL THEN sqlc.narg(attempt_cap)::INT ELSE p.attempt_cap END AS attempt_cap,
           CASE WHEN @set_backoff_base_ms::BOOL THEN sqlc.narg(backoff_base_ms)::BIGINT ELSE p.backoff_base_ms END AS backoff_base_ms,
           CASE WHEN @set_backoff_max_ms::BOOL THEN sqlc.narg(backoff_max_ms)::BIGINT ELSE p.backoff_max_ms END AS backoff_max_ms,
           CASE WHEN @set_rate_per_minute::BOOL THEN sqlc.narg(rate_per_minute)::INT ELSE p.rate_per_minute END AS rate_per_minute,
           CASE WHEN @set_rate_burst::BOOL THEN sqlc.narg(rate_burst)::INT ELSE p.rate_burst END AS rate_burst,
           CASE WHEN @set_text_window_seconds::BOOL THEN sqlc.narg(text_window_seconds)::BIGINT ELSE p.text_window_seconds END AS text_window_seconds,
           CASE WHEN @set_retryable_reasons::BOOL THEN sqlc.narg(retryable_reasons)::TEXT[] ELSE p.retryable_reasons END AS retryable_reasons,
           CASE WHEN @set_trip_failures::BOOL THEN sqlc.narg(trip_failures)::INT ELSE p.trip_failures END AS trip_failures,
           CASE WHEN @set_trip_unknowns::BOOL THEN sqlc.narg(trip_unknowns)::INT ELSE p.trip_unknowns END AS trip_unknowns,
           CASE WHEN @set_trip_window_seconds::BOOL THEN sqlc.narg(trip_window_seconds)::BIGINT ELSE p.trip_window_seconds END AS trip_window_seconds,
           CASE WHEN @set_probe_base_ms::BOOL THEN sqlc.narg(probe_base_ms)::BIGINT ELSE p.probe_base_ms END AS probe_base_ms,
           CASE WHEN @set_probe_max_ms::BOOL THEN sqlc.narg(probe_max_ms)::BIGINT ELSE p.probe_max_ms END AS probe_max_ms,
           CASE WHEN @set_backoff_factor::BOOL THEN sqlc.narg(backoff_factor)::DOUBLE PRECISION ELSE p.backoff_factor END AS backoff_factor
    FROM account
    LEFT JOIN prior p ON true
    WHERE account.known
),
changed AS (
    INSERT INTO policies (scope, attempt_cap, backoff_base_ms, backoff_max_ms, rate_per_minute, rate_burst, text_window_seconds, retryable_reasons,
                          trip_failures, trip_unknowns, trip_window_seconds, probe_base_ms, probe_max_ms, backoff_factor, updated_by, updated_at)
    SELECT @scope::TEXT, m.attempt_cap, m.backoff_base_ms, m.backoff_max_ms, m.rate_per_minute, m.rate_burst,
           m.text_window_seconds, m.retryable_reasons, m.trip_failures, m.trip_unknowns, m.trip_window_seconds,
           m.probe_base_ms, m.probe_max_ms, m.backoff_factor, @actor::TEXT, now()
    FROM merged m
    ON CONFLICT (scope) DO UPDATE SET
        attempt_cap = excluded.attempt_cap,
        backoff_base_ms = excluded.backoff_base_ms,
        backoff_max_ms = excluded.backoff_max_ms,
        rate_per_minute = excluded.rate_per_minute,
        rate_burst = excluded.rate_burst,
        text_window_seconds = excluded.text_window_seconds,
        retryable_reasons = excluded.retryable_reasons,
        trip_failures = excluded.trip_failures,
        trip_unknowns = excluded.trip_unknowns,
        trip_window_seconds = excluded.trip_window_seconds,
        probe_base_ms = excluded.probe_base_ms,
        probe_max_ms = excluded.probe_max_ms,
        backoff_factor = excluded.backoff_factor,
        updated_by = excluded.updated_by,
        updated_at = excluded.updated_at
    -- The guard: only the row this statement read, locked and merged into is replaced.
    WHERE EXISTS (SELECT 1 FROM prior)
    RETURNING scope, attempt_cap, backoff_base_ms, backoff_max_ms, rate_per_minute, rate_burst, text_window_seconds, retryable_reasons,
              trip_failures, trip_unknowns, trip_window_seconds, probe_base_ms, probe_max_ms, backoff_factor
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'policy', c.scope, @actor::TEXT, @reason::TEXT,
           (SELECT jsonb_build_object('attempt_cap', p.attempt_cap, 'backoff_base_ms', p.backoff_base_ms, 'backoff_max_ms', p.backoff_max_ms, 'rate_per_minute', p.rate_per_minute, 'rate_burst', p.rate_burst, 'text_window_seconds', p.text_window_seconds, 'retryable_reasons', p.retryable_reasons,
                                      'trip_failures', p.trip_failures, 'trip_unknowns', p.trip_unknowns, 'trip_window_seconds', p.trip_window_seconds, 'probe_base_ms', p.probe_base_ms, 'probe_max_ms', p.probe_max_ms, 'backoff_factor', p.backoff_factor) FROM prior p),
           jsonb_build_object('attempt_cap', c.attempt_cap, 'backoff_base_ms', c.backoff_base_ms, 'backoff_max_ms', c.backoff_max_ms, 'rate_per_minute', c.rate_per_minute, 'rate_burst', c.rate_burst, 'text_window_seconds', c.text_window_seconds, 'retryable_reasons', c.retryable_reasons,
                              'trip_failures', c.trip_failures, 'trip_unknowns', c.trip_unknowns, 'trip_window_seconds', c.trip_window_seconds, 'probe_base_ms', c.probe_base_ms, 'probe_max_ms', c.probe_max_ms, 'backoff_factor', c.backoff_factor)
    FROM changed c
    RETURNING before, after
)
SELECT a.known,
       (h.after IS NOT NULL)::BOOL AS changed,
       h.before, h.after
FROM account a
LEFT JOIN hist h ON true;

-- name: PoliciesList :many
-- Every policy row: the default (the empty scope) first, then each account's overrides.
SELECT scope, attempt_cap, backoff_base_ms, backoff_max_ms, rate_per_minute, rate_burst, text_window_seconds,
       retryable_reasons, updated_by, updated_at, trip_failures, trip_unknowns, trip_window_seconds, probe_base_ms,
       probe_max_ms, backoff_factor
FROM policies
ORDER BY scope;

-- name: PolicyLayersFor :many
-- The default row and the account's own row, if it has one, read together so the effective
-- policy computed from them is one consistent view.
SELECT scope, attempt_cap, backoff_base_ms, backoff_max_ms, rate_per_minute, rate_burst, text_window_seconds,
       retryable_reasons, updated_by, updated_at, trip_failures, trip_unknowns, trip_window_seconds, probe_base_ms,
       probe_max_ms, backoff_factor
FROM policies
WHERE scope IN ('', @scope::TEXT)
ORDER BY scope;

-- name: PolicyScopeKnown :one
-- Whether a policy scope names a configured account (the default scope always does): a read of
-- an account's policy refuses an account that does not exist, as a change does.
SELECT (@scope::TEXT = '' OR EXISTS (SELECT 1 FROM accounts a WHERE a.account_id = @scope::TEXT))::BOOL AS known;

-- name: ControlHistoryList :many
-- Operators' changes to controls, newest first; the empty kind means every kind.
SELECT control_id::TEXT AS control_id, kind, scope, actor, reason, before, after, at
FROM control_history
WHERE @kind::TEXT = '' OR kind = @kind::TEXT
ORDER BY at DESC, control_id DESC
LIMIT @max_rows::INT;

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
