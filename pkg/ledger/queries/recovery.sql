-- name: SweepStrandedPending :many
-- Pending intents nobody holds (no claim) whose last transition is older than idle_ms: the
-- work item that should bring them to a dispatcher may be lost. An intent whose not_before is
-- ahead is not stranded but waiting; once due it counts at once, idle or not, because a
-- dispatcher that met it long before its time let its work item go (docs/design.md#not-before-and-expires-at).
-- Found through intents_sweep_idx; oldest first.
SELECT i.delivery_key, i.account_id, i.transition_seq, i.traceparent
FROM intents i
WHERE i.state = 'pending'
  AND i.reason = ANY(@reasons::TEXT[])
  AND (i.updated_at <= now() - sqlc.arg(idle_ms)::BIGINT * INTERVAL '1 millisecond' OR i.not_before <= now())
  AND (i.not_before IS NULL OR i.not_before <= now())
  AND i.lease_expires_at IS NULL
ORDER BY i.updated_at
LIMIT @max_rows::INT;

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

-- name: SweepHeldToWake :many
-- The pending intents without a claim whose work item the dispatcher acknowledged while their
-- account held (docs/design.md#held-work-leaves-the-queue), now that it may go on: every one of
-- an account that serves again since less than @recent_ms (waiting since before it served:
-- updated_at up to since), and the oldest one of an account whose probe is due. wake is the
-- health row's version, the round of the work item's message id: JetStream keeps one copy per
-- intent and heal (or probe) however many passes find it before it is claimed. Oldest first,
-- at most @max_rows; read-only.
SELECT w.delivery_key, w.account_id, w.transition_seq, w.traceparent, h.version AS wake
FROM account_health h
JOIN LATERAL (
    SELECT i.delivery_key, i.account_id, i.transition_seq, i.traceparent, i.updated_at
    FROM intents i
    WHERE i.account_id = h.account_id
      -- Plain, so that intents_pending_account_idx serves it: one range per account.
      AND i.state = 'pending'
      AND i.reason = ANY(@reasons::TEXT[]) AND i.lease_expires_at IS NULL
      AND (h.state <> 'serving' OR i.updated_at <= h.since)
    ORDER BY i.updated_at
    LIMIT (CASE WHEN h.state = 'serving' THEN @max_rows::INT ELSE 1 END)
) w ON true
WHERE (h.state = 'serving' AND h.since > now() - sqlc.arg(recent_ms)::BIGINT * INTERVAL '1 millisecond')
   OR (h.state = 'holding' AND h.next_probe_at <= now())
   OR (h.state = 'probing' AND h.probe_until <= now())
ORDER BY w.updated_at
LIMIT @max_rows::INT;
