-- name: IntentsPage :many
-- An operator's page of intents in delivery-key order after @after_key (the empty key to
-- start), optionally only those in one state, of one account and with one reason (the empty
-- string: any), and changed last (updated_at) at or after @since and before @until (NULL: no
-- bound). Keyset pagination on the primary key: a page reads its rows and those the filters
-- skip, never an offset's worth, and never history.
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at, batch_ord, traceparent, attempts_uncounted, reply_to, not_before, expires_at
FROM intents
WHERE delivery_key > @after_key::BYTEA
  AND (@state::TEXT = '' OR state = @state::TEXT)
  AND (@account_id::TEXT = '' OR account_id = @account_id::TEXT)
  AND (@reason::TEXT = '' OR reason = @reason::TEXT)
  AND (sqlc.narg(since)::TIMESTAMPTZ IS NULL OR updated_at >= sqlc.narg(since)::TIMESTAMPTZ)
  AND (sqlc.narg(until)::TIMESTAMPTZ IS NULL OR updated_at < sqlc.narg(until)::TIMESTAMPTZ)
ORDER BY delivery_key
LIMIT @max_rows::INT;

-- name: ParkedPage :many
-- The same page for the parked intents, through intents_parked_idx: the state is written here,
-- not passed, because only a statement that names 'parked' can be planned on that partial index.
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at, batch_ord, traceparent, attempts_uncounted, reply_to, not_before, expires_at
FROM intents
WHERE state = 'parked'
  AND delivery_key > @after_key::BYTEA
  AND (@account_id::TEXT = '' OR account_id = @account_id::TEXT)
  AND (@reason::TEXT = '' OR reason = @reason::TEXT)
  AND (sqlc.narg(since)::TIMESTAMPTZ IS NULL OR updated_at >= sqlc.narg(since)::TIMESTAMPTZ)
  AND (sqlc.narg(until)::TIMESTAMPTZ IS NULL OR updated_at < sqlc.narg(until)::TIMESTAMPTZ)
ORDER BY delivery_key
LIMIT @max_rows::INT;

-- name: IntentsByTimePage :many
-- An operator's page of intents in the order of a time, sort_at: created_at when @by_created,
-- else updated_at; oldest first, or newest first when @descending; ties in delivery-key order,
-- the same way. After the position (@after_at, @after_key) of the previous page's last intent
-- (@after_at NULL: the first page), so that keyset pagination on (sort_at, delivery_key), a
-- total order, neither repeats nor skips an intent whose time did not change meanwhile. The
-- filters are IntentsPage's, the time bounds on sort_at. No index orders intents by a time: a
-- page reads and sorts every intent the filters keep (an index would be written by every
-- transition).
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at, batch_ord, traceparent, attempts_uncounted, reply_to, not_before, expires_at
FROM (
    SELECT i.*, CASE WHEN @by_created::BOOL THEN i.created_at ELSE i.updated_at END AS sort_at
    FROM intents i
    WHERE (@state::TEXT = '' OR i.state = @state::TEXT)
      AND (@account_id::TEXT = '' OR i.account_id = @account_id::TEXT)
      AND (@reason::TEXT = '' OR i.reason = @reason::TEXT)
) page
WHERE (sqlc.narg(since)::TIMESTAMPTZ IS NULL OR sort_at >= sqlc.narg(since)::TIMESTAMPTZ)
  AND (sqlc.narg(until)::TIMESTAMPTZ IS NULL OR sort_at < sqlc.narg(until)::TIMESTAMPTZ)
  AND (sqlc.narg(after_at)::TIMESTAMPTZ IS NULL
       OR (@descending::BOOL AND (sort_at, delivery_key) < (sqlc.narg(after_at)::TIMESTAMPTZ, @after_key::BYTEA))
       OR (NOT @descending::BOOL AND (sort_at, delivery_key) > (sqlc.narg(after_at)::TIMESTAMPTZ, @after_key::BYTEA)))
ORDER BY CASE WHEN @descending::BOOL THEN sort_at END DESC,
         CASE WHEN @descending::BOOL THEN delivery_key END DESC,
         sort_at, delivery_key
LIMIT @max_rows::INT;

-- name: ParkedByTimePage :many
-- IntentsByTimePage for the parked intents, through intents_parked_idx (ParkedPage).
SELECT delivery_key, account_id, action, target, request, occurrence, text_hash, source_id,
       source_version, state, reason, transition_seq, attempts_authorized, attempt_token, epoch,
       generation, lease_expires_at, object_id, created_at, updated_at, batch_ord, traceparent, attempts_uncounted, reply_to, not_before, expires_at
FROM (
    SELECT i.*, CASE WHEN @by_created::BOOL THEN i.created_at ELSE i.updated_at END AS sort_at
    FROM intents i
    WHERE i.state = 'parked'
      AND (@account_id::TEXT = '' OR i.account_id = @account_id::TEXT)
      AND (@reason::TEXT = '' OR i.reason = @reason::TEXT)
) page
WHERE (sqlc.narg(since)::TIMESTAMPTZ IS NULL OR sort_at >= sqlc.narg(since)::TIMESTAMPTZ)
  AND (sqlc.narg(until)::TIMESTAMPTZ IS NULL OR sort_at < sqlc.narg(until)::TIMESTAMPTZ)
  AND (sqlc.narg(after_at)::TIMESTAMPTZ IS NULL
       OR (@descending::BOOL AND (sort_at, delivery_key) < (sqlc.narg(after_at)::TIMESTAMPTZ, @after_key::BYTEA))
       OR (NOT @descending::BOOL AND (sort_at, delivery_key) > (sqlc.narg(after_at)::TIMESTAMPTZ, @after_key::BYTEA)))
ORDER BY CASE WHEN @descending::BOOL THEN sort_at END DESC,
         CASE WHEN @descending::BOOL THEN delivery_key END DESC,
         sort_at, delivery_key
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

-- name: RejectAt :one
-- The refused input stored from one message of a stream, through rejects_stream_seq_key: what
-- the outcome service tells the producer whose message it was.
SELECT reject_id::TEXT AS reject_id, reason, detail, subject, stream, stream_seq, headers,
       substring(raw FROM 1 FOR @preview_bytes::INT)::BYTEA AS preview, raw_size, raw_truncated, raw_sha256, received_at
FROM rejects
WHERE stream = @stream::TEXT AND stream_seq = @stream_seq::BIGINT;
