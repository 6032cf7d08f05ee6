-- name: SweepRetryCandidates :many
-- Failed intents the policy retries now: the reason is always retryable (always) or listed by
-- the account's policy, and the backoff since the failure has passed (base * factor^(counted
-- attempts - 1), at most max, with equal jitter: between half of it and all of it). Each account contributes at most as many as its retry bucket could ever hold
-- (its burst; max_rows when its rate is unlimited), plus those at the attempt cap, which are
-- parked without spending a token. Found through intents_sweep_idx: only reasons some policy
-- retries are read, so failed intents nobody retries cost nothing, and only those older than
-- the shortest backoff of any policy, so failed intents still inside it cost nothing either.
WITH due AS (
    SELECT i.delivery_key, i.account_id, i.transition_seq, i.updated_at,
           (i.attempts_authorized - i.attempts_uncounted >= coalesce(p.attempt_cap, d.attempt_cap))::BOOL AS exhausted,
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
      AND i.updated_at <= now() - (SELECT min(least(coalesce(x.backoff_base_ms, dx.backoff_base_ms), coalesce(x.backoff_max_ms, dx.backoff_max_ms))) / 2
                                   FROM policies x JOIN policies dx ON dx.scope = '') * INTERVAL '1 millisecond'
      -- Equal jitter: half the wait, plus up to another half spread by the attempt's generation
      -- (consecutive within a batch, so one batch's failures come back spread over the half
      -- instead of all at once).
      AND i.updated_at <= now() - least(
              coalesce(p.backoff_base_ms, d.backoff_base_ms)::DOUBLE PRECISION
                  * power(coalesce(p.backoff_factor, d.backoff_factor)::DOUBLE PRECISION, least(greatest(i.attempts_authorized - i.attempts_uncounted - 1, 0), 30)::DOUBLE PRECISION),
              coalesce(p.backoff_max_ms, d.backoff_max_ms)::DOUBLE PRECISION
          ) * (0.5 + 0.5 * mod(coalesce(i.generation, 0), 997)::DOUBLE PRECISION / 997.0) * INTERVAL '1 millisecond'
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
-- Only from failed, the one state that proves nothing was sent, and only for a reason the
-- account's policy retries as it stands now (@always, or its own list, else the default's):
-- the candidates were read earlier, and an operator may have taken the reason off the list
-- since. Rows are reached by primary key and locked in key order. outcome: retry | exhausted |
-- moved | not_retryable; no row for a missing key.
WITH input AS (
    SELECT unnest(@delivery_keys::BYTEA[]) AS delivery_key,
           unnest(@seqs::BIGINT[]) AS seq
),
cur AS (
    SELECT i.delivery_key, i.account_id, i.state, i.reason, i.attempts_authorized, i.attempts_uncounted, i.transition_seq
    FROM intents i
    WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
    ORDER BY i.delivery_key
    FOR UPDATE
),
verdict AS (
    SELECT cur.*,
           coalesce(p.attempt_cap, d.attempt_cap) AS attempt_cap,
           coalesce(p.retryable_reasons, d.retryable_reasons) AS retryable_reasons,
           (CASE
                WHEN cur.state <> 'failed' OR cur.transition_seq <> input.seq THEN 'moved'
                WHEN NOT (cur.reason = ANY(@always::TEXT[]) OR cur.reason = ANY(coalesce(p.retryable_reasons, d.retryable_reasons))) THEN 'not_retryable'
                WHEN cur.attempts_authorized - cur.attempts_uncounted >= coalesce(p.attempt_cap, d.attempt_cap) THEN 'exhausted'
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
      -- saw, for a reason the policy retries, and the cap decides between retrying and parking.
      AND (i.state = 'failed') IS TRUE -- by primary key, never through intents_sweep_idx (docs/design.md#the-sql-dialect)
      AND i.transition_seq = v.transition_seq
      AND (i.reason = ANY(@always::TEXT[]) OR i.reason = ANY(v.retryable_reasons))
      AND (i.attempts_authorized - i.attempts_uncounted >= v.attempt_cap) = (v.outcome = 'exhausted')
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
