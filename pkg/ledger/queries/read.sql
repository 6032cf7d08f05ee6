-- name: IntentGet :one
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at
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
