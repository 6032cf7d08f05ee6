-- name: SweepStrandedPending :many
-- Pending intents nobody holds (no claim) whose last transition is older than idle_ms: the
-- work item that should bring them to a dispatcher may be lost. Found through
-- intents_sweep_idx; oldest first.
SELECT i.delivery_key, i.account_id, i.transition_seq
FROM intents i
WHERE i.state = 'pending'
  AND i.reason = ANY(@reasons::TEXT[])
  AND i.updated_at <= now() - sqlc.arg(idle_ms)::BIGINT * INTERVAL '1 millisecond'
  AND i.lease_expires_at IS NULL
ORDER BY i.updated_at
LIMIT @max_rows::INT;

-- name: SweepRetryCandidates :many
-- Failed intents the policy retries now: the reason is always retryable (always) or listed by
-- the account's policy, and the backoff since the failure has passed (base * 2^(attempts - 1),
-- at most max). Each account contributes at most as many as its retry bucket could ever hold
-- (its burst; max_rows when its rate is unlimited), plus those at the attempt cap, which are
-- parked without spending a token. Found through intents_sweep_idx: only reasons some policy
-- retries are read, so failed intents nobody retries cost nothing, and only those older than
-- the shortest backoff of any policy, so failed intents still inside it cost nothing either.
WITH due AS (
    SELECT i.delivery_key, i.account_id, i.transition_seq, i.updated_at,
           (i.attempts_authorized >= coalesce(p.attempt_cap, d.attempt_cap))::BOOL AS exhausted,
           coalesce(p.rate_per_minute, d.rate_per_minute)::INT AS rate_per_minute,
           coalesce(p.rate_burst, d.rate_burst)::INT AS rate_burst
    FROM intents i
    JOIN policies d ON d.scope = ''
    LEFT JOIN policies p ON p.scope = i.account_id
    WHERE i.state = 'failed'
      AND i.reason = ANY(ARRAY(SELECT DISTINCT unnest(x.retryable_reasons) FROM policies x WHERE x.retryable_reasons IS NOT NULL) || @always::TEXT[])
      AND (i.reason = ANY(@always::TEXT[]) OR i.reason = ANY(coalesce(p.retryable_reasons, d.retryable_reasons)))
      -- Implied by the backoff test below (no backoff is shorter than its policy's first one),
      -- and the bound on updated_at the index can use: without it every failed intent inside
      -- its backoff is read on every pass.
      AND i.updated_at <= now() - (SELECT min(least(coalesce(x.backoff_base_ms, dx.backoff_base_ms), coalesce(x.backoff_max_ms, dx.backoff_max_ms)))
                                   FROM policies x JOIN policies dx ON dx.scope = '') * INTERVAL '1 millisecond'
      AND i.updated_at <= now() - least(
              coalesce(p.backoff_base_ms, d.backoff_base_ms)::DOUBLE PRECISION * power(2::DOUBLE PRECISION, least(greatest(i.attempts_authorized - 1, 0), 30)::DOUBLE PRECISION),
              coalesce(p.backoff_max_ms, d.backoff_max_ms)::DOUBLE PRECISION
          ) * INTERVAL '1 millisecond'
),
ranked AS (
    SELECT due.*, row_number() OVER (PARTITION BY due.account_id, due.exhausted ORDER BY due.updated_at, due.delivery_key) AS rank
    FROM due
)
SELECT r.delivery_key, r.account_id, r.transition_seq, r.exhausted, r.rate_per_minute, r.rate_burst
FROM ranked r
WHERE r.exhausted OR r.rank <= (CASE WHEN r.rate_per_minute = 0 THEN @max_rows::INT ELSE r.rate_burst END)
ORDER BY r.updated_at, r.delivery_key
LIMIT @max_rows::INT;

-- name: RetryBucketRefill :one
-- Refills an account's retry bucket at its policy rate (tokens per minute, at most burst; a
-- new bucket starts full) and locks the row until the transaction ends: sweepers running at
-- once take from one budget, one after the other.
INSERT INTO retry_buckets (account_id, tokens, refilled_at)
VALUES (@account_id::TEXT, sqlc.arg(rate_burst)::FLOAT8, now())
ON CONFLICT (account_id) DO UPDATE SET
    tokens = least(sqlc.arg(rate_burst)::FLOAT8,
                   retry_buckets.tokens + greatest(extract(epoch FROM now() - retry_buckets.refilled_at)::DOUBLE PRECISION, 0)
                                          * sqlc.arg(rate_per_minute)::FLOAT8 / 60.0),
    -- now() is the transaction's start: a sweeper that started before another's refill
    -- committed must not move the refill time back and be credited the same interval twice.
    refilled_at = greatest(retry_buckets.refilled_at, now())
RETURNING tokens;

-- name: RetryBucketSpend :exec
-- Takes the tokens the retries of this transaction used.
UPDATE retry_buckets SET tokens = greatest(tokens - sqlc.arg(spent)::FLOAT8, 0)
WHERE account_id = @account_id::TEXT;

-- name: IntentsRetryMany :many
-- The sweeper's automatic retry: each failed intent it saw at transition seqs (an intent that
-- moved on since is left alone) reopens to pending with a work item and NO attempt row (the
-- next Begin writes exactly one), or parks attempts_exhausted when the attempt cap is reached.
-- Only from failed, the one state that proves nothing was sent. Rows are reached by primary
-- key and locked in key order. outcome: retry | exhausted | moved; no row for a missing key.
WITH input AS (
    SELECT unnest(@delivery_keys::BYTEA[]) AS delivery_key,
           unnest(@seqs::BIGINT[]) AS seq
),
cur AS (
    SELECT i.delivery_key, i.account_id, i.state, i.attempts_authorized, i.transition_seq
    FROM intents i
    WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
    ORDER BY i.delivery_key
    FOR UPDATE
),
verdict AS (
    SELECT cur.*,
           coalesce(p.attempt_cap, d.attempt_cap) AS attempt_cap,
           (CASE
                WHEN cur.state <> 'failed' OR cur.transition_seq <> input.seq THEN 'moved'
                WHEN cur.attempts_authorized >= coalesce(p.attempt_cap, d.attempt_cap) THEN 'exhausted'
                ELSE 'retry'
            END)::TEXT AS outcome
    FROM cur
    JOIN input ON input.delivery_key = cur.delivery_key
    JOIN policies d ON d.scope = ''
    LEFT JOIN policies p ON p.scope = cur.account_id
),
changed AS (
    UPDATE intents i SET
        state = (CASE WHEN v.outcome = 'retry' THEN 'pending' ELSE 'parked' END),
        reason = (CASE WHEN v.outcome = 'retry' THEN 'retried' ELSE 'attempts_exhausted' END),
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM verdict v
    WHERE i.delivery_key = v.delivery_key
      AND v.outcome IN ('retry', 'exhausted')
      -- The guard, on the row being changed: ONLY from failed, at the transition the sweeper
      -- saw, and the cap decides between retrying and parking.
      AND (i.state = 'failed') IS TRUE -- by primary key, never through intents_sweep_idx (docs/design.md#the-sql-dialect)
      AND i.transition_seq = v.transition_seq
      AND (i.attempts_authorized >= v.attempt_cap) = (v.outcome = 'exhausted')
    RETURNING i.delivery_key, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.transition_seq
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor)
    SELECT c.delivery_key, c.transition_seq, 'failed', c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT
    FROM changed c
    RETURNING delivery_key, seq, to_state
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, h.to_state = 'pending' FROM hist h
    RETURNING seq
)
SELECT v.delivery_key::BYTEA AS delivery_key, v.outcome::TEXT AS outcome, c.state AS new_state
FROM verdict v
LEFT JOIN changed c ON c.delivery_key = v.delivery_key;

-- name: SweepUnreconciled :many
-- Indeterminate intents no reconciler will finish: the one lookup was claimed more than
-- stale_ms ago and never resolved (its reconciler died after the claim; a second lookup is
-- never allowed), or no lookup was ever claimed in unclaimed_ms (no reconciler serves the
-- intent). Found through intents_sweep_idx; the claim is read by primary key.
SELECT i.delivery_key
FROM intents i
LEFT JOIN reconciliations c ON c.attempt_token = i.attempt_token AND c.step = 'claimed'
WHERE i.state = 'indeterminate'
  AND i.reason = ANY(@reasons::TEXT[])
  AND NOT EXISTS (SELECT 1 FROM reconciliations r WHERE r.attempt_token = i.attempt_token AND r.step = 'resolved')
  AND ((c.at IS NOT NULL AND c.at <= now() - sqlc.arg(stale_ms)::BIGINT * INTERVAL '1 millisecond')
       OR (c.at IS NULL AND i.updated_at <= now() - sqlc.arg(unclaimed_ms)::BIGINT * INTERVAL '1 millisecond'))
ORDER BY i.updated_at
LIMIT @max_rows::INT;

-- name: IntentsParkUnreconciled :many
-- Parks indeterminate intents no reconciler will finish (reconcile_unavailable), for a human.
-- A claimed lookup that never resolved is closed as 'unavailable' in the same statement, so a
-- reconciler that wakes up late cannot resolve it any more; an intent whose lookup was never
-- claimed is parked only while still unclaimed. Nothing is ever looked up or sent here.
-- outcome: lookup_lost | never_reconciled | moved (resolved, claimed meanwhile, or no longer
-- indeterminate).
WITH cur AS (
    SELECT i.delivery_key, i.state, i.attempt_token, i.updated_at
    FROM intents i
    WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
    ORDER BY i.delivery_key
    FOR UPDATE
),
verdict AS (
    SELECT cur.*,
           (CASE
                WHEN cur.state <> 'indeterminate' THEN 'moved'
                WHEN EXISTS (SELECT 1 FROM reconciliations r WHERE r.attempt_token = cur.attempt_token AND r.step = 'resolved') THEN 'moved'
                WHEN EXISTS (SELECT 1 FROM reconciliations r WHERE r.attempt_token = cur.attempt_token AND r.step = 'claimed'
                                 AND r.at <= now() - sqlc.arg(stale_ms)::BIGINT * INTERVAL '1 millisecond') THEN 'lookup_lost'
                WHEN NOT EXISTS (SELECT 1 FROM reconciliations r WHERE r.attempt_token = cur.attempt_token AND r.step = 'claimed')
                     AND cur.updated_at <= now() - sqlc.arg(unclaimed_ms)::BIGINT * INTERVAL '1 millisecond' THEN 'never_reconciled'
                ELSE 'moved'
            END)::TEXT AS outcome
    FROM cur
),
closed AS (
    -- The primary key decides, not this statement's snapshot: a lost lookup is closed with
    -- its 'resolved' row, an unclaimed one is claimed by the sweeper (so no reconciler can
    -- claim it later); a reconciler's claim or resolution that committed meanwhile makes the
    -- insert a no-op, and nothing is parked.
    INSERT INTO reconciliations (attempt_token, step, delivery_key, result, actor, detail)
    SELECT v.attempt_token,
           (CASE WHEN v.outcome = 'lookup_lost' THEN 'resolved' ELSE 'claimed' END),
           v.delivery_key,
           (CASE WHEN v.outcome = 'lookup_lost' THEN 'unavailable' END),
           @actor::TEXT,
           jsonb_build_object('why', (CASE WHEN v.outcome = 'lookup_lost' THEN 'the claimed lookup never resolved'
                                          ELSE 'no reconciler claimed the lookup in time: it is not made' END))
    FROM verdict v
    WHERE v.outcome IN ('lookup_lost', 'never_reconciled')
    ON CONFLICT (attempt_token, step) DO NOTHING
    RETURNING attempt_token
),
changed AS (
    UPDATE intents i SET
        state = 'parked',
        reason = 'reconcile_unavailable',
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM verdict v
    WHERE i.delivery_key = v.delivery_key
      AND (i.state = 'indeterminate') IS TRUE -- by primary key, never through intents_sweep_idx (docs/design.md#the-sql-dialect)
      AND i.attempt_token = v.attempt_token
      -- The guard: parked only if this statement's row went in (the lost lookup closed, or
      -- the unclaimed lookup claimed by the sweeper before any reconciler).
      AND v.outcome IN ('lookup_lost', 'never_reconciled')
      AND EXISTS (SELECT 1 FROM closed c WHERE c.attempt_token = i.attempt_token)
    RETURNING i.delivery_key, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.transition_seq
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    SELECT c.delivery_key, c.transition_seq, 'indeterminate', c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT,
           jsonb_build_object('why', (SELECT v.outcome FROM verdict v WHERE v.delivery_key = c.delivery_key))
    FROM changed c
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, false FROM hist h
    RETURNING seq
)
SELECT v.delivery_key::BYTEA AS delivery_key, v.outcome, c.state AS new_state
FROM verdict v
LEFT JOIN changed c ON c.delivery_key = v.delivery_key;

-- name: ReconcileCandidates :many
-- Indeterminate intents whose one lookup was never claimed and that have been indeterminate
-- for at least min_age by the database's clock, oldest first, after the cursor (updated_at,
-- delivery_key): the reconciler's safety net for indeterminate events it missed, read page by
-- page. Found through intents_sweep_idx.
SELECT i.delivery_key, i.account_id, i.updated_at
FROM intents i
WHERE i.state = 'indeterminate'
  AND i.reason = ANY(@reasons::TEXT[])
  AND i.updated_at <= now() - sqlc.arg(min_age_ms)::BIGINT * INTERVAL '1 millisecond'
  AND (i.updated_at, i.delivery_key) > (@after_at::TIMESTAMPTZ, @after_key::BYTEA)
  AND NOT EXISTS (SELECT 1 FROM reconciliations r WHERE r.attempt_token = i.attempt_token)
ORDER BY i.updated_at, i.delivery_key
LIMIT @max_rows::INT;

-- name: ReconcileWaiting :one
-- The indeterminate intents whose one lookup is not claimed yet, and how long the oldest of
-- them has waited by the database's clock: what a person alerts on when reconciliation falls
-- behind. Read through intents_sweep_idx.
SELECT count(*)::BIGINT AS waiting,
       coalesce((extract(epoch FROM now() - min(i.updated_at)) * 1000)::BIGINT, 0)::BIGINT AS oldest_ms
FROM intents i
WHERE i.state = 'indeterminate'
  AND i.reason = ANY(@reasons::TEXT[])
  AND NOT EXISTS (SELECT 1 FROM reconciliations r WHERE r.attempt_token = i.attempt_token);

-- name: ReconcileStatus :one
-- Where an intent's reconciliation stands, with the intent, in one read: how long it has been
-- in its state by the database's clock, whether the lookup of its latest attempt was claimed or
-- resolved, and whether a worker reported a success it had read back (evidence that may spare
-- the lookup).
SELECT sqlc.embed(i),
       (extract(epoch FROM now() - i.updated_at) * 1000)::BIGINT AS age_ms,
       EXISTS (SELECT 1 FROM reconciliations r WHERE r.attempt_token = i.attempt_token AND r.step = 'claimed')::BOOL AS claimed,
       EXISTS (SELECT 1 FROM reconciliations r WHERE r.attempt_token = i.attempt_token AND r.step = 'resolved')::BOOL AS resolved,
       EXISTS (SELECT 1 FROM attempt_evidence e WHERE e.delivery_key = i.delivery_key AND e.outcome = 'success'
                   AND e.reason = 'published' AND coalesce(e.object_id, '') <> '')::BOOL AS reported_success
FROM intents i
WHERE i.delivery_key = @delivery_key::BYTEA;

-- name: IntentsOutstanding :one
-- The intents not published: those that may still move, and those waiting for a person, by
-- state. Each count is read through an index that holds only those intents (intents_sweep_idx,
-- intents_lease_expires_idx, intents_parked_idx), never a scan of the whole ledger.
SELECT (SELECT count(*) FROM intents i WHERE i.state = 'pending')::BIGINT AS pending,
       (SELECT count(*) FROM intents i WHERE i.lease_expires_at IS NOT NULL AND i.state = 'authorized')::BIGINT AS authorized,
       (SELECT count(*) FROM intents i WHERE i.state = 'failed')::BIGINT AS failed,
       (SELECT count(*) FROM intents i WHERE i.state = 'indeterminate')::BIGINT AS indeterminate,
       (SELECT count(*) FROM intents i WHERE i.state = 'parked')::BIGINT AS parked;
