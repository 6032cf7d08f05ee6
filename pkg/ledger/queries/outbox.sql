-- name: OutboxPending :many
-- The oldest transitions not yet published, with what their events carry, of those in the
-- outbox for settled_ms or longer by the database's clock (0: all of them).
SELECT o.delivery_key, o.seq, o.dispatch, x.account_id,
       x.from_state, x.to_state, x.reason, x.attempt_token, x.epoch, x.generation, x.actor, x.at, x.traceparent
FROM outbox o
CROSS JOIN LATERAL (
    -- OFFSET 0 keeps this a per-row index lookup: joined flat, the planner seq-scans history.
    SELECT i.account_id, h.from_state, h.to_state, h.reason, h.attempt_token, h.epoch, h.generation, h.actor, h.at, i.traceparent
    FROM history h JOIN intents i ON i.delivery_key = h.delivery_key
    WHERE h.delivery_key = o.delivery_key AND h.seq = o.seq AND i.delivery_key = o.delivery_key
    OFFSET 0
) x
WHERE o.created_at <= now() - sqlc.arg(settled_ms)::BIGINT * '1 millisecond'::INTERVAL
ORDER BY o.created_at, o.delivery_key, o.seq
LIMIT @max_rows::INT;

-- name: OutboxDelete :many
-- Forgets transitions whose events JetStream acknowledged, and names those this statement
-- removed (a row another relay removed first is not among them). The rows are found by key
-- through the primary key, and each is tested against the (key, sequence) pairs by a hashed
-- subplan (IS TRUE keeps the IN from becoming a join): joined to the pairs, PostgreSQL, which
-- finds the outbox all but empty whenever it analyzes it, nested the join and compared every
-- row with every pair (16,384 comparisons for a batch of 128, most of the delete's CPU).
DELETE FROM outbox o
WHERE o.delivery_key = ANY(@delivery_keys::BYTEA[])
  AND ((o.delivery_key, o.seq) IN (SELECT unnest(@delivery_keys::BYTEA[]), unnest(@seqs::BIGINT[]))) IS TRUE
RETURNING o.delivery_key, o.seq;

-- name: OutboxLag :one
-- How far the relays are behind: the outbox's rows and the age of the oldest, by the
-- database's clock (outbox_created_at_idx finds it).
SELECT (SELECT count(*) FROM outbox)::BIGINT AS rows,
       coalesce((SELECT (extract(epoch FROM now() - min(o.created_at)) * 1000)::BIGINT FROM outbox o), 0)::BIGINT AS oldest_ms;

-- name: OutboxPendingFor :many
-- The transitions of the given intents not yet published: a writer's own publishing right
-- after its commit, and the dispatcher's witness of an authorization.
SELECT o.delivery_key, o.seq, o.dispatch, x.account_id,
       x.from_state, x.to_state, x.reason, x.attempt_token, x.epoch, x.generation, x.actor, x.at, x.traceparent
FROM outbox o
CROSS JOIN LATERAL (
    -- OFFSET 0 keeps this a per-row index lookup: joined flat, the planner seq-scans history.
    SELECT i.account_id, h.from_state, h.to_state, h.reason, h.attempt_token, h.epoch, h.generation, h.actor, h.at, i.traceparent
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
       x.from_state, x.to_state, x.reason, x.attempt_token, x.epoch, x.generation, x.actor, x.at, x.traceparent
FROM outbox o
CROSS JOIN LATERAL (
    -- OFFSET 0 keeps this a per-row index lookup: joined flat, the planner seq-scans history.
    SELECT i.account_id, h.from_state, h.to_state, h.reason, h.attempt_token, h.epoch, h.generation, h.actor, h.at, i.traceparent
    FROM history h JOIN intents i ON i.delivery_key = h.delivery_key
    WHERE h.delivery_key = o.delivery_key AND h.seq = o.seq AND i.delivery_key = o.delivery_key
    OFFSET 0
) x
WHERE o.delivery_key = ANY(@delivery_keys::BYTEA[])
UNION
SELECT h.delivery_key, h.seq, false, i.account_id,
       h.from_state, h.to_state, h.reason, h.attempt_token, h.epoch, h.generation, h.actor, h.at, i.traceparent
FROM c
JOIN history h ON h.delivery_key = c.delivery_key AND h.to_state = 'authorized' AND h.attempt_token = c.attempt_token
JOIN intents i ON i.delivery_key = h.delivery_key
ORDER BY delivery_key, seq;

-- name: OutboxEarlierFor :many
-- The transitions of the given intents not yet published that an earlier transaction left,
-- read in a hot write's transaction right after its statement, so that the writer publishes
-- them and the ones its statement wrote (which it names itself) without reading the outbox
-- again after its commit. Its own rows are told apart by their writer, not by their age: a
-- transaction that began after the write's and committed before the write's statement locked
-- the intent (it waited on another intent's lock) left rows younger than the write's now().
-- An intent's rows up to its entry of after_seqs (aligned with delivery_keys; 0: none) are
-- left out: JetStream acknowledged them before the writer took the intent up (its work item
-- followed them). IS TRUE keeps both filters on the rows the keys find, ahead of the lookups.
SELECT o.delivery_key, o.seq, o.dispatch, x.account_id,
       x.from_state, x.to_state, x.reason, x.attempt_token, x.epoch, x.generation, x.actor, x.at, x.traceparent
FROM outbox o
CROSS JOIN LATERAL (
    -- OFFSET 0 keeps this a per-row index lookup: joined flat, the planner seq-scans history.
    SELECT i.account_id, h.from_state, h.to_state, h.reason, h.attempt_token, h.epoch, h.generation, h.actor, h.at, i.traceparent
    FROM history h JOIN intents i ON i.delivery_key = h.delivery_key
    WHERE h.delivery_key = o.delivery_key AND h.seq = o.seq AND i.delivery_key = o.delivery_key
    OFFSET 0
) x
WHERE o.delivery_key = ANY(@delivery_keys::BYTEA[])
  AND (o.writer IS DISTINCT FROM @writer::BIGINT) IS TRUE
  AND (o.seq > (@after_seqs::BIGINT[])[array_position(@delivery_keys::BYTEA[], o.delivery_key)]) IS TRUE
ORDER BY o.delivery_key, o.seq;
