-- name: IntentRetry :one
-- Reopens a failed intent: back to pending, with a dispatch work item, and NO attempt row (the
-- next Begin writes exactly one). When the attempt cap is reached it parks the intent instead
-- (attempts_exhausted). outcome: retry | exhausted | invalid_transition; no row when the
-- intent does not exist. @actor is who asked (a role, or an operator), @detail (NULL: none)
-- goes to the history row, e.g. an operator's note.
WITH cur AS (
    SELECT i.delivery_key, i.account_id, i.state, i.attempts_authorized, i.attempts_uncounted, i.transition_seq,
           i.attempt_token, i.epoch, i.generation
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA
    FOR UPDATE
),
verdict AS (
    SELECT cur.*,
           coalesce(p.attempt_cap, d.attempt_cap) AS attempt_cap,
           (CASE
                WHEN cur.state <> 'failed' THEN 'invalid_transition'
                WHEN cur.attempts_authorized - cur.attempts_uncounted >= coalesce(p.attempt_cap, d.attempt_cap) THEN 'exhausted'
                ELSE 'retry'
            END)::TEXT AS outcome
    FROM cur
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
      -- The guard, on the row being changed: ONLY from failed.
      AND (i.state = 'failed') IS TRUE -- by primary key, never through intents_sweep_idx (docs/design.md#the-sql-dialect)
      AND (i.attempts_authorized - i.attempts_uncounted >= v.attempt_cap) = (v.outcome = 'exhausted')
    RETURNING i.delivery_key, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.transition_seq
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    SELECT c.delivery_key, c.transition_seq, 'failed', c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT,
           coalesce(sqlc.narg(detail)::JSONB, '{}'::JSONB)
    FROM changed c
    RETURNING delivery_key, seq, to_state
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, h.to_state = 'pending' FROM hist h
    RETURNING seq
)
SELECT v.outcome::TEXT AS outcome, v.state::TEXT AS prior_state, c.state AS new_state
FROM verdict v
LEFT JOIN changed c ON true;
