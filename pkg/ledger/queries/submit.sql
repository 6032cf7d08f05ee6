-- name: IntentSubmit :many
-- Creates every intent of the batch that does not exist yet, in pending, with its history row
-- (seq 1, reason submitted) and its outbox row (a dispatch work item), in one statement.
-- Returns one row per distinct input key: created, duplicate (the delivery key exists, or a ledger
-- restore blocked it: restore_blocks) or unknown_account.
-- A created intent's source version becomes the source's stored head. A traceparent ('' for
-- none) is stored only with the intent it creates: a duplicate keeps the first one's, and so
-- are not_before and expires_at ('' for none): the first stored times stand. Each row
-- also names the transition it wrote, as its event carries it (out_*, for a created intent:
-- see outboxed, pkg/ledger/outbox.go).
WITH batch AS (
    -- Several set-returning functions in one SELECT list advance together, row by row.
    SELECT unnest(@delivery_keys::BYTEA[]) AS delivery_key,
           unnest(@account_ids::TEXT[]) AS account_id,
           unnest(@actions::TEXT[]) AS action,
           unnest(@targets::TEXT[]) AS target,
           unnest(@requests::TEXT[]) AS request,
           unnest(@occurrences::TEXT[]) AS occurrence,
           unnest(@text_hashes::BYTEA[]) AS text_hash,
           unnest(@source_ids::TEXT[]) AS source_id,
           unnest(@source_versions::BYTEA[]) AS source_version,
           unnest(@traceparents::TEXT[]) AS traceparent,
           unnest(@reply_tos::BYTEA[]) AS reply_to,
           unnest(@not_befores::TEXT[]) AS not_before,
           unnest(@expires_ats::TEXT[]) AS expires_at,
           generate_subscripts(@delivery_keys::BYTEA[], 1) AS ord
),
input AS (
    SELECT b.delivery_key, b.account_id, b.action, b.target, b.request, b.occurrence, b.ord,
           NULLIF(b.text_hash, ''::BYTEA) AS text_hash,
           NULLIF(b.source_id, '') AS source_id,
           NULLIF(b.source_version, ''::BYTEA) AS source_version,
           NULLIF(b.traceparent, '') AS traceparent,
           NULLIF(b.reply_to, ''::BYTEA) AS reply_to,
           NULLIF(b.not_before, '')::TIMESTAMPTZ AS not_before,
           NULLIF(b.expires_at, '')::TIMESTAMPTZ AS expires_at
    FROM batch b
),
known AS (
    SELECT input.* FROM input JOIN accounts a ON a.account_id = input.account_id
),
created AS (
    -- batch_ord keeps the batch's order (the producer's, as ingest fetched it): its intents
    -- share created_at, and the first stored wins a duplicate-text claim.
    INSERT INTO intents (delivery_key, account_id, action, target, request, occurrence, text_hash, source_id, source_version, traceparent, reply_to, not_before, expires_at, state, reason, transition_seq, batch_ord)
    SELECT k.delivery_key, k.account_id, k.action, k.target, k.request, k.occurrence, k.text_hash, k.source_id, k.source_version, k.traceparent, k.reply_to, k.not_before, k.expires_at, 'pending', 'submitted', 1, k.ord
    FROM known k
    -- A key a ledger restore could not recreate (restore_blocks) is never created again: it
    -- answers duplicate, as the intent itself would.
    WHERE NOT EXISTS (SELECT 1 FROM restore_blocks rb WHERE rb.delivery_key = k.delivery_key)
    ON CONFLICT (delivery_key) DO NOTHING
    RETURNING delivery_key, source_id, source_version
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, actor)
    SELECT c.delivery_key, 1, NULL, 'pending', 'submitted', @actor::TEXT FROM created c
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch, writer)
    SELECT h.delivery_key, h.seq, true, NULLIF(@writer::BIGINT, 0) FROM hist h
    RETURNING delivery_key
),
heads AS (
    -- A NEW version of a source becomes its stored head: it supersedes whatever the store
    -- holds (resolve to the stored head, never refuse because a head exists). A version the
    -- ledger has seen before (an earlier intent rested on it, or it was the head before the
    -- current one) never becomes head again, so a late intent on an old version cannot turn
    -- the head back. Of a batch, the candidate of each source is the last intent in batch order
    -- that was created on a version new to the ledger: one refused (unknown account) or already
    -- stored (duplicate) never decides the head.
    INSERT INTO source_heads (source_id, head_version)
    SELECT DISTINCT ON (c.source_id) c.source_id, c.source_version
    FROM created c
    JOIN batch b ON b.delivery_key = c.delivery_key
    WHERE c.source_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.source_id = c.source_id AND i.source_version = c.source_version)
    ORDER BY c.source_id, b.ord DESC
    ON CONFLICT (source_id) DO UPDATE SET
        previous_version = source_heads.head_version,
        head_version = excluded.head_version,
        updated_at = now()
    WHERE source_heads.head_version <> excluded.head_version
      AND source_heads.previous_version IS DISTINCT FROM excluded.head_version
    RETURNING source_id
)
SELECT input.delivery_key::BYTEA AS delivery_key,
       (CASE WHEN o.delivery_key IS NOT NULL THEN 'created'
             WHEN k.delivery_key IS NULL THEN 'unknown_account'
             ELSE 'duplicate' END)::TEXT AS outcome,
       1::BIGINT AS out_seq, true AS out_dispatch, input.account_id::TEXT AS out_account,
       ''::TEXT AS out_from, 'pending'::TEXT AS out_to, 'submitted'::TEXT AS out_reason,
       NULL::BYTEA AS out_token, NULL::BIGINT AS out_epoch, NULL::BIGINT AS out_generation,
       @actor::TEXT AS out_actor, now()::TIMESTAMPTZ AS out_at, coalesce(input.traceparent, '')::TEXT AS out_traceparent
FROM input
LEFT JOIN known k ON k.delivery_key = input.delivery_key
LEFT JOIN outbox_rows o ON o.delivery_key = input.delivery_key;
