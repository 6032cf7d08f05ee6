-- name: IntentComplete :one
-- Records the transport's outcome of an authorized attempt. When the fence holds (the intent
-- is authorized by this very attempt: token, epoch, generation) the intent moves to @to_state
-- (published, failed or indeterminate, decided by the caller from the outcome) and a failed
-- attempt releases its duplicate-text claim. Whatever the fence says, the outcome is appended
-- to attempt_evidence, with fenced = true when it changed no state: the reconciler reads it
-- before it spends its one lookup. Always one row back; prior_state is NULL when no intent has
-- that key.
WITH cur AS (
    SELECT i.delivery_key, i.account_id, i.state, i.attempt_token, i.epoch, i.generation, i.transition_seq, i.text_hash
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA
    FOR UPDATE
),
changed AS (
    UPDATE intents i SET
        state = @to_state::TEXT,
        reason = @reason::TEXT,
        object_id = sqlc.narg(object_id)::TEXT,
        lease_expires_at = NULL,
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM cur
    WHERE i.delivery_key = cur.delivery_key
      -- The fence: only the attempt that holds the authorization may decide its outcome.
      AND i.state = 'authorized'
      AND i.attempt_token = @attempt_token::BYTEA
      AND i.epoch = @epoch::BIGINT
      AND i.generation = @generation::BIGINT
    RETURNING i.delivery_key, i.account_id, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.transition_seq, i.text_hash
),
evidence AS (
    INSERT INTO attempt_evidence (attempt_token, delivery_key, epoch, generation, outcome, reason, object_id, fenced, detail)
    VALUES (@attempt_token::BYTEA, @delivery_key::BYTEA, @epoch::BIGINT, @generation::BIGINT, @outcome::TEXT,
            @reason::TEXT, sqlc.narg(object_id)::TEXT, NOT EXISTS (SELECT 1 FROM changed), @detail::JSONB)
    RETURNING evidence_id
),
released AS (
    -- Only a proven not-sent gives the text back to the account.
    DELETE FROM text_claims t
    USING changed c
    WHERE c.state = 'failed'
      AND t.account_id = c.account_id
      AND t.text_hash = c.text_hash
      AND t.delivery_key = c.delivery_key
    RETURNING t.text_hash
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    SELECT c.delivery_key, c.transition_seq, 'authorized', c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT, @detail::JSONB
    FROM changed c
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, false FROM hist h
    RETURNING seq
)
SELECT cur.state AS prior_state,
       c.state AS new_state,
       (SELECT e.evidence_id FROM evidence e) AS evidence_id,
       (SELECT count(*) FROM released)::BIGINT AS released
FROM (SELECT 1) AS one
LEFT JOIN cur ON true
LEFT JOIN changed c ON true;
