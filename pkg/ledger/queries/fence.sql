-- name: IntentParkUnsendable :one
-- The dispatcher parks a pending intent that its platform adapter cannot render
-- (request_unsendable): the request names an action the platform does not know, or lacks a
-- field it needs. No attempt was opened and nothing was sent. Only from pending with no claim
-- (a stale claim is abandoned first, by the sweeper or the next Begin); changed is false
-- otherwise, and no row comes back for a key the ledger does not hold.
WITH cur AS (
    SELECT i.delivery_key, i.state
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA
    FOR UPDATE
),
changed AS (
    UPDATE intents i SET
        state = 'parked',
        reason = 'request_unsendable',
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM cur
    WHERE i.delivery_key = cur.delivery_key
      -- The guard, on the row being changed: pending, and nobody holds it.
      AND (i.state = 'pending') IS TRUE -- by primary key, never through intents_sweep_idx (docs/design.md#the-sql-dialect)
      AND i.lease_expires_at IS NULL
    RETURNING i.delivery_key, i.attempt_token, i.epoch, i.generation, i.transition_seq
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    SELECT c.delivery_key, c.transition_seq, 'pending', 'parked', 'request_unsendable', c.attempt_token, c.epoch, c.generation, @actor::TEXT, @detail::JSONB
    FROM changed c
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, false FROM hist h
    RETURNING seq
)
SELECT cur.state::TEXT AS prior_state, EXISTS (SELECT 1 FROM changed)::BOOL AS changed
FROM cur;

-- name: IntentsSuperseded :many
-- The freshness fence, a read: which intents of a batch rest on a source version that is no
-- longer the stored head (the same test Authorize makes, superseded_source). The head only moves
-- forward, so an intent found superseded stays so.
SELECT i.delivery_key
FROM intents i
LEFT JOIN source_heads h ON h.source_id = i.source_id
WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
  -- IS TRUE: by primary key, never through intents_source_idx, which the planner would scan
  -- whole when its statistics say few intents have a source.
  AND (i.source_id IS NOT NULL) IS TRUE
  AND h.head_version IS DISTINCT FROM i.source_version;

-- name: IntentsParkSuperseded :many
-- The dispatcher parks pending intents whose source moved on (superseded_source) before any
-- attempt: no attempt is opened, no request rendered, nothing sent, so a backlog of outdated
-- intents fails cheaply. Only from pending with no claim (a stale claim is abandoned first, by
-- the sweeper or the next Begin) and only while the source's stored head is another version,
-- both tested on the row being changed. Rows are locked in key order, so concurrent batches
-- never deadlock. One row back per intent parked.
WITH cur AS (
    SELECT i.delivery_key
    FROM intents i
    WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
    ORDER BY i.delivery_key
    FOR UPDATE
),
changed AS (
    UPDATE intents i SET
        state = 'parked',
        reason = 'superseded_source',
        transition_seq = i.transition_seq + 1,
        updated_at = now()
    FROM cur
    WHERE i.delivery_key = cur.delivery_key
      -- The guard, on the row being changed: pending, nobody holds it, and its source's head is
      -- another version.
      AND (i.state = 'pending') IS TRUE -- a batch by primary key, never through intents_sweep_idx (docs/design.md#the-sql-dialect)
      AND i.lease_expires_at IS NULL
      AND (i.source_id IS NOT NULL) IS TRUE -- nor through intents_source_idx
      AND (SELECT h.head_version FROM source_heads h WHERE h.source_id = i.source_id) IS DISTINCT FROM i.source_version
    RETURNING i.delivery_key, i.attempt_token, i.epoch, i.generation, i.transition_seq
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor)
    SELECT c.delivery_key, c.transition_seq, 'pending', 'parked', 'superseded_source', c.attempt_token, c.epoch, c.generation, @actor::TEXT
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
