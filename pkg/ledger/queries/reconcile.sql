-- name: ReconciliationClaim :one
-- Claims the ONE lookup of the attempt that left the intent indeterminate. The claim is
-- committed before the lookup is made; the primary key (attempt_token, 'claimed') makes a
-- second claim impossible, by any reconciler, after any crash. claimed is false when the
-- lookup was already claimed or the intent is not indeterminate; no row when it does not exist.
-- reclaimed is true when the existing claim carries @claim_token: the caller's own claim, whose
-- answer it did not hear (a lost COMMIT reply), and whose lookup it has therefore not made.
WITH cur AS (
    SELECT i.delivery_key, i.state, i.attempt_token, i.epoch, i.generation
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA
    FOR UPDATE
),
claimed AS (
    INSERT INTO reconciliations (attempt_token, step, delivery_key, actor, claim_token)
    SELECT cur.attempt_token, 'claimed', cur.delivery_key, @actor::TEXT, @claim_token::BYTEA
    FROM cur
    WHERE cur.state = 'indeterminate'
    ON CONFLICT (attempt_token, step) DO NOTHING
    RETURNING attempt_token
)
SELECT cur.state::TEXT AS state,
       cur.attempt_token,
       cur.epoch,
       cur.generation,
       EXISTS (SELECT 1 FROM claimed) AS claimed,
       (cur.state = 'indeterminate' AND EXISTS (
           SELECT 1 FROM reconciliations r
           WHERE r.attempt_token = cur.attempt_token AND r.step = 'claimed' AND r.claim_token = @claim_token::BYTEA
       ))::BOOL AS reclaimed
FROM cur;

-- name: ReconciliationResolve :one
-- Records what the one lookup found and moves the intent on: found -> published, proven
-- not-sent (an idempotency-status lookup) -> failed, anything else -> parked. Only for the
-- attempt whose lookup was claimed, only once ('resolved' is a primary key too), and only
-- while the intent is still indeterminate with that attempt. A not-sent verdict never stands
-- against a worker's reported success for the intent: the two disagree, so a human decides
-- (parked, evidence_conflict) and nothing is retried. Only the holder of the claim resolves:
-- the claimed row must carry @claim_token. repeated is true when this claim's result, the same
-- one, was recorded already: the caller's own earlier write, whose answer it did not hear.
WITH cur AS (
    SELECT i.delivery_key, i.account_id, i.state, i.attempt_token, i.text_hash
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA
    FOR UPDATE
),
resolved AS (
    INSERT INTO reconciliations (attempt_token, step, delivery_key, result, object_id, actor, detail, claim_token)
    SELECT cur.attempt_token, 'resolved', cur.delivery_key, @result::TEXT, sqlc.narg(object_id)::TEXT, @actor::TEXT, @detail::JSONB, @claim_token::BYTEA
    FROM cur
    WHERE cur.state = 'indeterminate'
      AND cur.attempt_token = @attempt_token::BYTEA
      AND EXISTS (SELECT 1 FROM reconciliations r WHERE r.attempt_token = @attempt_token::BYTEA AND r.step = 'claimed'
                      AND r.claim_token = @claim_token::BYTEA)
    ON CONFLICT (attempt_token, step) DO NOTHING
    RETURNING attempt_token
),
changed AS (
    UPDATE intents i SET
        state = (CASE WHEN x.conflict THEN 'parked' ELSE @to_state::TEXT END),
        reason = (CASE WHEN x.conflict THEN 'evidence_conflict' ELSE @reason::TEXT END),
        object_id = coalesce(sqlc.narg(object_id)::TEXT, i.object_id),
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM resolved r,
         LATERAL (
             SELECT @to_state::TEXT = 'failed' AND EXISTS (
                 SELECT 1 FROM attempt_evidence e
                 WHERE e.delivery_key = @delivery_key::BYTEA AND e.outcome = 'success'
             ) AS conflict
         ) x
    WHERE i.delivery_key = @delivery_key::BYTEA
      AND (i.state = 'indeterminate') IS TRUE -- by primary key, never through intents_sweep_idx (docs/design.md#the-sql-dialect)
      AND i.attempt_token = r.attempt_token
      AND @to_state::TEXT IN ('published', 'failed', 'parked')
    RETURNING i.delivery_key, i.account_id, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.transition_seq, i.text_hash
),
released AS (
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
    SELECT c.delivery_key, c.transition_seq, 'indeterminate', c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT, @detail::JSONB
    FROM changed c
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, false FROM hist h
    RETURNING seq
)
SELECT cur.state::TEXT AS prior_state,
       c.state AS new_state,
       (SELECT count(*) FROM released)::BIGINT AS released,
       EXISTS (SELECT 1 FROM reconciliations r WHERE r.attempt_token = @attempt_token::BYTEA AND r.step = 'resolved'
                   AND r.claim_token = @claim_token::BYTEA AND r.result = @result::TEXT)::BOOL AS repeated
FROM cur
LEFT JOIN changed c ON true;

-- name: IntentResolveFromEvidence :one
-- An indeterminate intent resolved without a lookup: a worker that was fenced out reported a
-- success with this object id, and the caller read the object back and confirmed its text.
WITH cur AS (
    SELECT i.delivery_key, i.state
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA
    FOR UPDATE
),
changed AS (
    UPDATE intents i SET
        state = 'published',
        reason = 'evidence_found',
        object_id = @object_id::TEXT,
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM cur
    WHERE i.delivery_key = cur.delivery_key
      AND (i.state = 'indeterminate') IS TRUE -- by primary key, never through intents_sweep_idx (docs/design.md#the-sql-dialect)
      AND EXISTS (
          -- A success the worker confirmed by read-back (reason published), with this object.
          SELECT 1 FROM attempt_evidence e
          WHERE e.delivery_key = i.delivery_key AND e.outcome = 'success' AND e.reason = 'published'
            AND e.object_id = @object_id::TEXT
      )
    RETURNING i.delivery_key, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.transition_seq
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    SELECT c.delivery_key, c.transition_seq, 'indeterminate', c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT,
           jsonb_build_object('object_id', @object_id::TEXT)
    FROM changed c
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, false FROM hist h
    RETURNING seq
)
SELECT cur.state::TEXT AS prior_state, c.state AS new_state
FROM cur
LEFT JOIN changed c ON true;

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
