-- name: IntentsComplete :many
-- Records the transport's outcome of each authorized attempt of the batch. Where the fence
-- holds (the intent is authorized by this very attempt: token, epoch, generation, and that
-- epoch is still the current one) the intent
-- moves to its @to_states entry (published, failed or indeterminate, decided by the caller
-- from the outcome) and a failed attempt releases its duplicate-text claim. Whatever the fence
-- says, every outcome is appended to attempt_evidence, with fenced = true where it changed no
-- state: the reconciler reads it before it spends its one lookup. The evidence keeps the stream
-- sequence of the attempt's acknowledged authorized event (@witness_seqs, 0 for none): a
-- restored ledger's proof of where its replay of ATMOST_EVENTS starts. A report of an attempt
-- whose completion landed already (repeated) writes nothing. One row per input key;
-- prior_state is NULL where no intent has that key. evidence_written is counted once per key
-- and joined: a count per output row would rescan the whole evidence CTE for every report, a
-- cost that grows with the square of the batch. Each row also names the transition it wrote,
-- as its event carries it (out_*, seq NULL for none: see outboxed, pkg/ledger/outbox.go).
WITH batch AS (
    SELECT unnest(@delivery_keys::BYTEA[]) AS delivery_key,
           unnest(@attempt_tokens::BYTEA[]) AS attempt_token,
           unnest(@epochs::BIGINT[]) AS epoch,
           unnest(@generations::BIGINT[]) AS generation,
           unnest(@to_states::TEXT[]) AS to_state,
           unnest(@reasons::TEXT[]) AS reason,
           unnest(@object_ids::TEXT[]) AS object_id,
           unnest(@outcomes::TEXT[]) AS outcome,
           unnest(@details::TEXT[]) AS detail,
           unnest(@witness_seqs::BIGINT[]) AS witness_seq
),
input AS (
    SELECT b.delivery_key, b.attempt_token, b.epoch, b.generation, b.to_state, b.reason,
           NULLIF(b.object_id, '') AS object_id, b.outcome, b.detail::JSONB AS detail,
           NULLIF(b.witness_seq, 0) AS witness_seq
    FROM batch b
),
cur AS (
    SELECT i.delivery_key, i.state
    FROM intents i
    WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
    ORDER BY i.delivery_key
    FOR UPDATE
),
changed AS (
    UPDATE intents i SET
        state = n.to_state,
        reason = n.reason,
        object_id = n.object_id,
        lease_expires_at = NULL,
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM input n
    WHERE i.delivery_key = n.delivery_key
      -- The fence: only the attempt that holds the authorization may decide its outcome.
      AND i.state = 'authorized'
      AND i.attempt_token = n.attempt_token
      AND i.epoch = n.epoch
      AND i.generation = n.generation
      -- A worker of an epoch before the current one is refused everywhere (the restore
      -- protocol): its outcome is evidence only.
      AND i.epoch = (SELECT max(e.epoch) FROM epochs e)
      AND n.to_state IN ('published', 'failed', 'indeterminate')
    RETURNING i.delivery_key, i.account_id, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.transition_seq, i.text_hash, i.traceparent
),
landed AS (
    -- This very report of this very attempt, committed already (its evidence unfenced): the
    -- caller's own earlier completion, whose answer was lost. It is answered as it landed and
    -- writes nothing, no fenced evidence of a newer attempt that does not exist. (Begin and the
    -- sweeper write the evidence of an abandoned or expired attempt, with reasons, abandoned
    -- and lease_expired, that no report carries.)
    SELECT DISTINCT n.delivery_key
    FROM input n
    JOIN cur ON cur.delivery_key = n.delivery_key AND cur.state <> 'authorized'
    JOIN attempt_evidence e ON e.delivery_key = n.delivery_key AND e.attempt_token = n.attempt_token AND NOT e.fenced
                           AND e.outcome = n.outcome AND e.reason = n.reason
                           AND e.object_id IS NOT DISTINCT FROM n.object_id
),
evidence AS (
    INSERT INTO attempt_evidence (attempt_token, delivery_key, epoch, generation, outcome, reason, object_id, fenced, detail, witness_seq)
    SELECT n.attempt_token, n.delivery_key, n.epoch, n.generation, n.outcome, n.reason, n.object_id,
           NOT EXISTS (SELECT 1 FROM changed c WHERE c.delivery_key = n.delivery_key), n.detail, n.witness_seq
    FROM input n
    WHERE NOT EXISTS (SELECT 1 FROM landed l WHERE l.delivery_key = n.delivery_key)
    RETURNING delivery_key
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
    SELECT c.delivery_key, c.transition_seq, 'authorized', c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT, n.detail
    FROM changed c JOIN input n ON n.delivery_key = c.delivery_key
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch, writer)
    SELECT h.delivery_key, h.seq, false, NULLIF(@writer::BIGINT, 0) FROM hist h
    RETURNING seq
)
SELECT n.delivery_key::BYTEA AS delivery_key,
       cur.state AS prior_state,
       c.state AS new_state,
       coalesce(w.written, 0)::BIGINT AS evidence_written,
       EXISTS (SELECT 1 FROM landed l WHERE l.delivery_key = n.delivery_key)::BOOL AS repeated,
       c.transition_seq AS out_seq, false AS out_dispatch, c.account_id AS out_account,
       'authorized'::TEXT AS out_from, c.state AS out_to, c.reason AS out_reason,
       c.attempt_token AS out_token, c.epoch AS out_epoch, c.generation AS out_generation,
       @actor::TEXT AS out_actor, now()::TIMESTAMPTZ AS out_at, c.traceparent AS out_traceparent,
       -- Whether the account's health is watching (holding, probing, or counting failures), so
       -- that even a success must be reported to it (AccountHealthReport): by primary key.
       EXISTS (SELECT 1 FROM account_health h WHERE h.account_id = c.account_id AND (h.state <> 'serving' OR h.failures > 0))::BOOL AS health_watch
FROM input n
LEFT JOIN cur ON cur.delivery_key = n.delivery_key
LEFT JOIN changed c ON c.delivery_key = n.delivery_key
LEFT JOIN (SELECT e.delivery_key, count(*) AS written FROM evidence e GROUP BY e.delivery_key) w
       ON w.delivery_key = n.delivery_key;
