-- name: RejectsToReplay :many
-- A page of stored rejects for atmost rejects replay, in the order ingest read them (stream and
-- sequence, through rejects_stream_seq_key) after the cursor (@after_stream, @after_seq): of one
-- reason (the empty string: any), received at or after @since. Each row carries every byte the
-- ledger kept of the message and the latest replay that stored its intent (the reject's mark),
-- NULL when none has, read through control_history_scope_idx. Every reject ingest stores has a
-- stream sequence; a row without one names no message and is not replayed.
WITH page AS (
    SELECT r.reject_id, r.reason, r.detail, r.subject, r.stream, r.stream_seq, r.headers,
           r.raw, r.raw_size, r.raw_truncated, r.raw_sha256, r.received_at
    FROM rejects r
    WHERE r.stream_seq IS NOT NULL
      AND (r.stream, r.stream_seq) > (@after_stream::TEXT, @after_seq::BIGINT)
      AND (@reason::TEXT = '' OR r.reason = @reason::TEXT)
      AND r.received_at >= @since::TIMESTAMPTZ
    ORDER BY r.stream, r.stream_seq
    LIMIT @max_rows::INT
),
marks AS (
    SELECT DISTINCT ON (c.scope) c.scope, c.actor, c.at, c.after
    FROM control_history c
    JOIN page p ON c.scope = p.reject_id::TEXT
    WHERE c.kind = 'reject_replay' AND c.after->>'outcome' IN ('created', 'already_stored')
    ORDER BY c.scope, c.at DESC
)
SELECT p.reject_id::TEXT AS reject_id, p.reason, p.detail, p.subject, p.stream, p.stream_seq, p.headers,
       p.raw, p.raw_size, p.raw_truncated, p.raw_sha256, p.received_at,
       m.actor AS replayed_by, m.at AS replayed_at, m.after AS replayed_after
FROM page p
LEFT JOIN marks m ON m.scope = p.reject_id::TEXT
ORDER BY p.stream, p.stream_seq;

-- name: RejectsToReplayCount :one
-- How many stored rejects a replay's filters select (before the account filter, which only
-- the parsed envelope can apply): the "of N" of its progress.
SELECT count(*)::BIGINT
FROM rejects r
WHERE r.stream_seq IS NOT NULL
  AND (@reason::TEXT = '' OR r.reason = @reason::TEXT)
  AND r.received_at >= @since::TIMESTAMPTZ;

-- name: RejectReplaysRecord :many
-- Writes one control_history row per replayed reject, in the transaction of the replay's
-- IntentSubmit: kind reject_replay, scope the reject's id, the operator and the reason; before
-- the reject's reason and detail as stored and the message's stream position, after what the
-- replay did (outcome created, already_stored or refused; the account and delivery key of a
-- valid envelope; the reason and detail of a refusal). Returns one row per input, in input
-- order: whether the reject exists, whether its row was written, and the latest replay that had
-- stored its intent before (the mark).
WITH batch AS (
    SELECT unnest(@reject_ids::TEXT[]) AS reject_id,
           unnest(@outcomes::TEXT[]) AS outcome,
           unnest(@accounts::TEXT[]) AS account,
           unnest(@delivery_keys::TEXT[]) AS delivery_key,
           unnest(@reasons_now::TEXT[]) AS reason_now,
           unnest(@details_now::TEXT[]) AS detail_now,
           generate_subscripts(@reject_ids::TEXT[], 1) AS ord
),
input AS (
    SELECT b.reject_id, b.outcome, b.account, b.delivery_key, b.reason_now, b.detail_now, b.ord,
           r.reason, r.detail, r.stream, r.stream_seq
    FROM batch b
    JOIN rejects r ON r.reject_id = b.reject_id::UUID
),
marked AS (
    -- A reject is marked replayed by a replay that stored its intent: one that created it, or
    -- found it stored already. A replay refused again marks nothing, so the reject is replayed
    -- again once its cause is fixed.
    SELECT DISTINCT ON (h.scope) h.scope, h.actor, h.at, h.after
    FROM control_history h
    JOIN input i ON h.scope = i.reject_id
    WHERE h.kind = 'reject_replay' AND (h.after->>'outcome') IN ('created', 'already_stored')
    ORDER BY h.scope, h.at DESC
),
recorded AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'reject_replay', i.reject_id, @actor::TEXT, @reason::TEXT,
           jsonb_build_object('reason', i.reason, 'detail', i.detail, 'stream', i.stream, 'stream_seq', i.stream_seq),
           jsonb_build_object('outcome', i.outcome, 'account', NULLIF(i.account, ''), 'delivery_key', NULLIF(i.delivery_key, ''),
                              'reason', NULLIF(i.reason_now, ''), 'detail', NULLIF(i.detail_now, ''))
    FROM input i
    -- The guard: a reject whose intent a replay stored is replayed again only when asked to.
    WHERE @again::BOOL OR NOT EXISTS (SELECT 1 FROM marked m WHERE m.scope = i.reject_id)
    RETURNING scope
)
SELECT b.reject_id::TEXT AS reject_id,
       (i.reject_id IS NOT NULL)::BOOL AS known,
       (rc.scope IS NOT NULL)::BOOL AS recorded,
       m.actor AS replayed_by, m.at AS replayed_at, m.after AS replayed_after
FROM batch b
LEFT JOIN input i ON i.ord = b.ord
LEFT JOIN recorded rc ON rc.scope = b.reject_id
LEFT JOIN marked m ON m.scope = b.reject_id
ORDER BY b.ord;
