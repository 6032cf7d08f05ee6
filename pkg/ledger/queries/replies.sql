-- name: IntentsParents :many
-- The dispatcher's read of the parents of a batch's replies (envelope reply_to), by primary key:
-- whether each is published, and the object it created, which the reply targets. A parent the
-- ledger does not hold has no row.
SELECT p.delivery_key, p.state, p.reason, p.object_id
FROM intents p
WHERE p.delivery_key = ANY(@delivery_keys::BYTEA[]);

-- name: IntentsParkDependencyUnmet :many
-- Parks the pending replies among @delivery_keys whose parent ended without being published
-- (dependency_unmet): the parent is parked, or failed for a reason its account's policy does not
-- retry (nor retried always: @always_retried), or failed at its attempt cap. No attempt is
-- opened and nothing is sent. Only from pending with no claim (a claimed reply meets the same
-- test in Authorize), and only while the parent is so, both tested on the row being changed,
-- the parent read under a share lock so that it cannot be resolved or retried meanwhile. Rows
-- are locked in key order, so concurrent batches never deadlock. One row back per intent
-- parked; the history row's detail names the parent and how it ended.
WITH cur AS (
    SELECT i.delivery_key, i.reply_to
    FROM intents i
    WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
    ORDER BY i.delivery_key
    FOR UPDATE
),
parent AS (
    SELECT p.delivery_key, p.state, p.reason,
           (p.state = 'parked'
            OR (p.state = 'failed'
                AND NOT (p.reason = ANY(@always_retried::TEXT[]) OR p.reason = ANY(coalesce(pp.retryable_reasons, d.retryable_reasons))))
            OR (p.state = 'failed' AND p.attempts_authorized - p.attempts_uncounted >= coalesce(pp.attempt_cap, d.attempt_cap))) AS ended
    FROM intents p
    JOIN policies d ON d.scope = ''
    LEFT JOIN policies pp ON pp.scope = p.account_id
    WHERE p.delivery_key IN (SELECT cur.reply_to FROM cur)
    ORDER BY p.delivery_key
    FOR SHARE OF p
),
changed AS (
    UPDATE intents i SET
        state = 'parked',
        reason = 'dependency_unmet',
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM cur
    JOIN parent p ON p.delivery_key = cur.reply_to
    WHERE i.delivery_key = cur.delivery_key
      -- The guard, on the row being changed: pending, nobody holds it, and its parent ended
      -- without a publication.
      AND (i.state = 'pending') IS TRUE -- a batch by primary key, never through intents_sweep_idx (docs/design.md#the-sql-dialect)
      AND i.lease_expires_at IS NULL
      AND p.ended
    RETURNING i.delivery_key, i.attempt_token, i.epoch, i.generation, i.transition_seq, p.delivery_key AS parent_key, p.state AS parent_state, p.reason AS parent_reason
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    SELECT c.delivery_key, c.transition_seq, 'pending', 'parked', 'dependency_unmet', c.attempt_token, c.epoch, c.generation, @actor::TEXT,
           jsonb_build_object('reply_to', 'dk1:' || encode(c.parent_key, 'hex'), 'parent_state', c.parent_state, 'parent_reason', c.parent_reason)
    FROM changed c
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, false FROM hist h
    RETURNING seq
)
SELECT c.delivery_key::BYTEA AS delivery_key
FROM changed c;

-- name: IntentsWaitingReplies :many
-- The replies that wait for any of @delivery_keys (their parents): pending with no claim, found
-- through intents_reply_to_idx. The relay publishes a work item for each when a parent's
-- publication, or its end without one, is relayed: a waiting reply is never polled.
SELECT i.delivery_key, i.account_id, i.transition_seq, i.traceparent, i.reply_to
FROM intents i
WHERE i.reply_to = ANY(@delivery_keys::BYTEA[])
  AND (i.state = 'pending') IS TRUE -- through intents_reply_to_idx, never intents_sweep_idx
  AND i.lease_expires_at IS NULL;
