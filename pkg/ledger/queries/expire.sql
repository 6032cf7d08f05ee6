-- name: IntentsWithExpiredLease :many
-- Intents whose lease has expired, oldest first, found through intents_lease_expires_idx.
SELECT delivery_key FROM intents
WHERE lease_expires_at IS NOT NULL AND lease_expires_at <= now()
ORDER BY lease_expires_at
LIMIT @max_rows::INT;

-- name: IntentsExpireLeases :many
-- Ends expired leases, one way only: a claim that never reached authorization is abandoned
-- (nothing was sent: the intent is free again, with a dispatch work item), an authorized one
-- becomes indeterminate (bytes may have left: never pending, never resent). The attempt's
-- evidence says which: abandoned, or unknown (lease_expired), never abandoned for an
-- authorization, which would tell the person resolving it that nothing was sent. Rows are
-- reached by primary key; the guard re-checks state and expiry on each.
WITH changed AS (
    UPDATE intents i SET
        state = (CASE WHEN i.state = 'authorized' THEN 'indeterminate' ELSE 'pending' END),
        reason = (CASE WHEN i.state = 'authorized' THEN 'lease_expired' ELSE 'abandoned' END),
        lease_expires_at = NULL,
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
      AND i.state IN ('pending', 'authorized')
      -- Written so that no index can serve it: the rows are reached by primary key
      -- (docs/design.md#the-sql-dialect). A bare lease_expires_at <= now() lets the planner prefer a range of
      -- intents_lease_expires_idx once a batch is large, a shared index whose predicate locks
      -- would abort the dispatchers' transitions under SERIALIZABLE.
      AND (i.lease_expires_at <= now()) IS TRUE
    RETURNING i.delivery_key, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.transition_seq
),
evidence AS (
    INSERT INTO attempt_evidence (attempt_token, delivery_key, epoch, generation, outcome, reason, fenced)
    SELECT c.attempt_token, c.delivery_key, c.epoch, c.generation,
           (CASE WHEN c.state = 'pending' THEN 'abandoned' ELSE 'unknown' END), c.reason, false
    FROM changed c
    RETURNING evidence_id
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor)
    SELECT c.delivery_key, c.transition_seq,
           (CASE WHEN c.state = 'indeterminate' THEN 'authorized' ELSE 'pending' END),
           c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT
    FROM changed c
    RETURNING delivery_key, seq, to_state
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, h.to_state = 'pending' FROM hist h
    RETURNING seq
)
SELECT c.delivery_key, c.state FROM changed c;
