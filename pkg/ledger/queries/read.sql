-- name: IntentGet :one
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at, batch_ord, traceparent, attempts_uncounted, reply_to, not_before, expires_at
FROM intents
WHERE delivery_key = @delivery_key::BYTEA;

-- name: AttemptsByIntent :many
SELECT attempt_token, delivery_key, account_id, action, request_hash, credential_version, epoch, generation, created_at
FROM attempts
WHERE delivery_key = @delivery_key::BYTEA
ORDER BY generation;

-- name: EvidenceByIntent :many
SELECT evidence_id, attempt_token, delivery_key, epoch, generation, outcome, reason, object_id, fenced, detail, recorded_at
FROM attempt_evidence
WHERE delivery_key = @delivery_key::BYTEA
ORDER BY recorded_at, evidence_id;

-- name: HistoryByIntent :many
SELECT delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail, at
FROM history
WHERE delivery_key = @delivery_key::BYTEA
ORDER BY seq;

-- name: IntentsGetMany :many
-- The dispatcher's read of a batch of work: the intents by primary key, whatever their state.
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at, batch_ord, traceparent, attempts_uncounted, reply_to, not_before, expires_at
FROM intents
WHERE delivery_key = ANY(@delivery_keys::BYTEA[]);

-- name: IntentsOutstanding :one
-- The intents not published: those that may still move, and those waiting for a person, by
-- state. Each count is read through an index that holds only those intents (intents_sweep_idx,
-- intents_lease_expires_idx, intents_parked_idx), never a scan of the whole ledger.
SELECT (SELECT count(*) FROM intents i WHERE i.state = 'pending')::BIGINT AS pending,
       (SELECT count(*) FROM intents i WHERE i.lease_expires_at IS NOT NULL AND i.state = 'authorized')::BIGINT AS authorized,
       (SELECT count(*) FROM intents i WHERE i.state = 'failed')::BIGINT AS failed,
       (SELECT count(*) FROM intents i WHERE i.state = 'indeterminate')::BIGINT AS indeterminate,
       (SELECT count(*) FROM intents i WHERE i.state = 'parked')::BIGINT AS parked;
