-- name: IntentsGetMany :many
-- The dispatcher's read of a batch of work: the intents by primary key, whatever their state.
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at
FROM intents
WHERE delivery_key = ANY(@delivery_keys::BYTEA[]);

-- name: DispatchGates :many
-- The dispatcher's cheap look before Begin, per account: its configuration, whether a kill
-- switch (its own or the global one) stops it, its rate (0: unlimited) and the tokens its
-- bucket holds now (a bucket never used is full). Reads only; Authorize re-checks every gate
-- in the statement that decides.
SELECT a.account_id, a.platform, a.settings, a.credential_ref, a.credential_version, a.revoked,
       a.contract_version,
       EXISTS (SELECT 1 FROM switches s WHERE s.scope IN ('', a.account_id) AND s.engaged)::BOOL AS stopped,
       coalesce(p.rate_per_minute, d.rate_per_minute)::INT AS rate_per_minute,
       (CASE
            WHEN b.account_id IS NULL THEN coalesce(p.rate_burst, d.rate_burst)::DOUBLE PRECISION
            ELSE least(coalesce(p.rate_burst, d.rate_burst)::DOUBLE PRECISION,
                       b.tokens + extract(epoch FROM coalesce(sqlc.narg(now)::TIMESTAMPTZ, now()) - b.refilled_at)::DOUBLE PRECISION
                                  * coalesce(p.rate_per_minute, d.rate_per_minute) / 60.0)
        END)::DOUBLE PRECISION AS tokens
FROM accounts a
CROSS JOIN policies d
LEFT JOIN policies p ON p.scope = a.account_id
LEFT JOIN rate_buckets b ON b.account_id = a.account_id
WHERE d.scope = '' AND a.account_id = ANY(@account_ids::TEXT[]);

-- name: OutboxPendingFor :many
-- The transitions of the given intents not yet published: a writer's own publishing right
-- after its commit, and the dispatcher's witness of an authorization.
SELECT o.delivery_key, o.seq, o.dispatch, x.account_id,
       x.from_state, x.to_state, x.reason, x.attempt_token, x.epoch, x.generation, x.actor, x.at
FROM outbox o
CROSS JOIN LATERAL (
    -- OFFSET 0 keeps this a per-row index lookup: joined flat, the planner seq-scans history.
    SELECT i.account_id, h.from_state, h.to_state, h.reason, h.attempt_token, h.epoch, h.generation, h.actor, h.at
    FROM history h JOIN intents i ON i.delivery_key = h.delivery_key
    WHERE h.delivery_key = o.delivery_key AND h.seq = o.seq AND i.delivery_key = o.delivery_key
    OFFSET 0
) x
WHERE o.delivery_key = ANY(@delivery_keys::BYTEA[])
ORDER BY o.delivery_key, o.seq;

-- name: OutboxWitnessFor :many
-- The dispatcher's witness of its authorizations, before any byte: the transitions of the
-- given intents not yet published (as OutboxPendingFor) and, also when the outbox no longer
-- holds it, the authorized transition of each given attempt (dispatch false). A relay round
-- may have published that one first; the dispatcher publishes it again all the same, because
-- only JetStream's own acknowledgement names the stream sequence of the copy it holds (for a
-- duplicate, the sequence of the copy stored first), which Complete records with the
-- outcome. UNION: a transition both in the outbox and authorized comes once.
WITH c AS (
    SELECT unnest(@delivery_keys::BYTEA[]) AS delivery_key,
           unnest(@attempt_tokens::BYTEA[]) AS attempt_token
)
SELECT o.delivery_key, o.seq, o.dispatch, x.account_id,
       x.from_state, x.to_state, x.reason, x.attempt_token, x.epoch, x.generation, x.actor, x.at
FROM outbox o
CROSS JOIN LATERAL (
    -- OFFSET 0 keeps this a per-row index lookup: joined flat, the planner seq-scans history.
    SELECT i.account_id, h.from_state, h.to_state, h.reason, h.attempt_token, h.epoch, h.generation, h.actor, h.at
    FROM history h JOIN intents i ON i.delivery_key = h.delivery_key
    WHERE h.delivery_key = o.delivery_key AND h.seq = o.seq AND i.delivery_key = o.delivery_key
    OFFSET 0
) x
WHERE o.delivery_key = ANY(@delivery_keys::BYTEA[])
UNION
SELECT h.delivery_key, h.seq, false, i.account_id,
       h.from_state, h.to_state, h.reason, h.attempt_token, h.epoch, h.generation, h.actor, h.at
FROM c
JOIN history h ON h.delivery_key = c.delivery_key AND h.to_state = 'authorized' AND h.attempt_token = c.attempt_token
JOIN intents i ON i.delivery_key = h.delivery_key
ORDER BY delivery_key, seq;

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
