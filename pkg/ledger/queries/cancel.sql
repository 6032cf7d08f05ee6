-- name: IntentCancel :one
-- The producer's cancel: the intent of @account_id with this key is parked cancelled if and only
-- if it is not yet authorized (pending, with or without a claim, or failed and waiting for a
-- retry): nothing was sent on it and, parked, nothing ever will be. Any other state is too late
-- and changes nothing: authorized (the send may be under way), published, indeterminate, or
-- parked already (cancelled by an earlier request: the answer says so again). An intent of
-- another account is not found, never told apart from none. Authorize's fence requires pending,
-- so a claim parked here can no longer be authorized: the one row lock decides which of the two
-- came first. outcome: cancelled | too_late | NULL (no such intent of this account); state and
-- reason are the intent's after the statement.
WITH cur AS (
    SELECT i.delivery_key, i.state, i.reason, i.transition_seq
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA AND i.account_id = @account_id::TEXT
    FOR UPDATE
),
changed AS (
    UPDATE intents i SET
        state = 'parked',
        reason = 'cancelled',
        lease_expires_at = NULL,
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM cur
    WHERE i.delivery_key = cur.delivery_key
      -- The guard, on the row being changed: not yet authorized.
      AND i.state IN ('pending', 'failed')
    RETURNING i.delivery_key, i.attempt_token, i.epoch, i.generation, i.transition_seq
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    SELECT c.delivery_key, c.transition_seq, cur.state, 'parked', 'cancelled', c.attempt_token, c.epoch, c.generation, @actor::TEXT, @detail::JSONB
    FROM changed c CROSS JOIN cur
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, false FROM hist h
    RETURNING seq
)
SELECT (CASE WHEN c.delivery_key IS NOT NULL OR (cur.state = 'parked' AND cur.reason = 'cancelled') THEN 'cancelled' ELSE 'too_late' END)::TEXT AS outcome,
       cur.state::TEXT AS prior_state,
       (c.delivery_key IS NOT NULL)::BOOLEAN AS changed,
       (CASE WHEN c.delivery_key IS NOT NULL THEN 'parked' ELSE cur.state END)::TEXT AS state,
       (CASE WHEN c.delivery_key IS NOT NULL THEN 'cancelled' ELSE cur.reason END)::TEXT AS reason,
       coalesce(c.transition_seq, cur.transition_seq)::BIGINT AS seq
FROM cur
LEFT JOIN changed c ON c.delivery_key = cur.delivery_key;
