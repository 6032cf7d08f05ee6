-- name: IntentPark :one
-- An operator stops an intent: it becomes parked, owned by a human. Refused for published and
-- parked intents, and for an authorized intent whose worker's lease is live (bytes may be
-- leaving right now; its outcome or its expiry decides first), and for a state outside
-- from_states.
WITH cur AS (
    SELECT i.delivery_key, i.state, i.lease_expires_at
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA
    FOR UPDATE
),
verdict AS (
    SELECT cur.*,
           (CASE
                WHEN cur.state NOT IN ('pending', 'authorized', 'failed', 'indeterminate') THEN 'invalid_transition'
                -- A caller may park from fewer states: a bulk park only those it previewed.
                WHEN NOT cur.state = ANY(@from_states::TEXT[]) THEN 'invalid_transition'
                WHEN cur.state = 'authorized' AND cur.lease_expires_at > now() THEN 'lease_live'
                ELSE 'park'
            END)::TEXT AS outcome
    FROM cur
),
changed AS (
    UPDATE intents i SET
        state = 'parked',
        reason = 'operator_parked',
        lease_expires_at = NULL,
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM verdict v
    WHERE i.delivery_key = v.delivery_key
      AND v.outcome = 'park'
      -- The guard, on the row being changed.
      AND i.state IN ('pending', 'authorized', 'failed', 'indeterminate')
      AND NOT (i.state = 'authorized' AND i.lease_expires_at > now())
    RETURNING i.delivery_key, i.attempt_token, i.epoch, i.generation, i.transition_seq
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    SELECT c.delivery_key, c.transition_seq, v.state, 'parked', 'operator_parked', c.attempt_token, c.epoch, c.generation, @actor::TEXT, @detail::JSONB
    FROM changed c CROSS JOIN verdict v
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, false FROM hist h
    RETURNING seq
)
SELECT v.outcome::TEXT AS outcome, v.state::TEXT AS prior_state, c.delivery_key AS changed_key
FROM verdict v
LEFT JOIN changed c ON true;

-- name: IntentResolve :one
-- A human resolves a parked intent, with evidence: published (the object exists) or failed
-- (it was not sent; the text is released). Only from parked, and failed never with an object.
WITH cur AS (
    SELECT i.delivery_key, i.state
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA
    FOR UPDATE
),
changed AS (
    UPDATE intents i SET
        state = @to_state::TEXT,
        reason = @reason::TEXT,
        object_id = coalesce(sqlc.narg(object_id)::TEXT, i.object_id),
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM cur
    WHERE i.delivery_key = cur.delivery_key
      AND (i.state = 'parked') IS TRUE -- by primary key, never through intents_parked_idx (docs/design.md#the-sql-dialect)
      AND @to_state::TEXT IN ('published', 'failed')
      -- A failed intent may be retried: one that named an object would be posted twice.
      AND NOT (@to_state::TEXT = 'failed' AND sqlc.narg(object_id)::TEXT IS NOT NULL)
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
    SELECT c.delivery_key, c.transition_seq, 'parked', c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT, @detail::JSONB
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

-- name: EpochBump :one
-- Starts the next restore epoch and appends the change to control_history in the same
-- statement. Every claim of an older epoch is refused from then on. Two bumps at once cannot
-- both succeed: the second one's epoch collides with the first's (primary key) or, under
-- SERIALIZABLE, fails to serialize.
WITH cur AS (
    SELECT max(e.epoch)::BIGINT AS epoch FROM epochs e
),
bumped AS (
    INSERT INTO epochs (epoch, reason, actor)
    SELECT cur.epoch + 1, @reason::TEXT, @actor::TEXT FROM cur
    RETURNING epoch
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'epoch', '', @actor::TEXT, @reason::TEXT, jsonb_build_object('epoch', cur.epoch), jsonb_build_object('epoch', b.epoch)
    FROM bumped b CROSS JOIN cur
    RETURNING control_id
)
SELECT b.epoch FROM bumped b;

-- name: EpochLatest :one
-- The current restore epoch's row: who started it, when and why.
SELECT epoch, reason, actor, created_at FROM epochs ORDER BY epoch DESC LIMIT 1;

-- name: EpochCurrent :one
SELECT max(epoch)::BIGINT FROM epochs;
