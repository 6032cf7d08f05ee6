-- name: IntentsPage :many
-- An operator's page of intents in delivery-key order after @after_key (the empty key to
-- start), optionally only those in one state and of one account (the empty string: any).
-- Keyset pagination on the primary key: a page reads its rows and those the filters skip, never
-- an offset's worth, and never history.
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at, traceparent
FROM intents
WHERE delivery_key > @after_key::BYTEA
  AND (@state::TEXT = '' OR state = @state::TEXT)
  AND (@account_id::TEXT = '' OR account_id = @account_id::TEXT)
ORDER BY delivery_key
LIMIT @max_rows::INT;

-- name: ParkedPage :many
-- The same page for the parked intents, through intents_parked_idx: the state is written here,
-- not passed, because only a statement that names 'parked' can be planned on that partial index.
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at, traceparent
FROM intents
WHERE state = 'parked'
  AND delivery_key > @after_key::BYTEA
  AND (@account_id::TEXT = '' OR account_id = @account_id::TEXT)
ORDER BY delivery_key
LIMIT @max_rows::INT;

-- name: ReconciliationsByIntent :many
-- The reconciliation steps (claimed, resolved) of every attempt of an intent, reached through
-- the attempts of the intent (attempts_delivery_key_idx, then the reconciliations primary key).
SELECT r.attempt_token, r.step, r.result, r.object_id, r.actor, r.detail, r.at
FROM attempts a
JOIN reconciliations r ON r.attempt_token = a.attempt_token
WHERE a.delivery_key = @delivery_key::BYTEA
ORDER BY r.at, a.generation, r.step;

-- name: RejectsList :many
-- Refused input, newest first (rejects_received_at_idx, read backwards), optionally of one
-- reason (the empty string: any). The raw bytes stay in the table; a preview of their first
-- @preview_bytes comes back.
SELECT reject_id::TEXT AS reject_id, reason, detail, subject, stream, stream_seq, headers,
       substring(raw FROM 1 FOR @preview_bytes::INT)::BYTEA AS preview, raw_size, raw_truncated, raw_sha256, received_at
FROM rejects
WHERE @reason::TEXT = '' OR reason = @reason::TEXT
ORDER BY received_at DESC, reject_id DESC
LIMIT @max_rows::INT;
