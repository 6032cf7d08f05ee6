-- name: OutboxPending :many
-- The oldest transitions not yet published, with what their events carry.
SELECT o.delivery_key, o.seq, o.dispatch, i.account_id,
       h.from_state, h.to_state, h.reason, h.attempt_token, h.epoch, h.generation, h.actor, h.at
FROM outbox o
JOIN history h ON h.delivery_key = o.delivery_key AND h.seq = o.seq
JOIN intents i ON i.delivery_key = o.delivery_key
ORDER BY o.created_at, o.delivery_key, o.seq
LIMIT @max_rows::INT;

-- name: OutboxDelete :execrows
-- Forgets transitions whose events JetStream acknowledged.
DELETE FROM outbox o
USING (SELECT unnest(@delivery_keys::BYTEA[]) AS delivery_key, unnest(@seqs::BIGINT[]) AS seq) d
WHERE o.delivery_key = d.delivery_key AND o.seq = d.seq;
