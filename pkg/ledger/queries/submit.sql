-- name: IntentSubmit :many
-- Creates every intent of the batch that does not exist yet, in pending, with its history row
-- (seq 1, reason submitted) and its outbox row (a dispatch work item), in one statement.
-- Returns one row per distinct input key: created, duplicate (the delivery key exists) or unknown_account.
-- The first version seen of a source becomes its stored head.
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
           unnest(@source_versions::BYTEA[]) AS source_version
),
input AS (
    SELECT b.delivery_key, b.account_id, b.action, b.target, b.request, b.occurrence,
           NULLIF(b.text_hash, ''::BYTEA) AS text_hash,
           NULLIF(b.source_id, '') AS source_id,
           NULLIF(b.source_version, ''::BYTEA) AS source_version
    FROM batch b
),
known AS (
    SELECT input.* FROM input JOIN accounts a ON a.account_id = input.account_id
),
created AS (
    INSERT INTO intents (delivery_key, account_id, action, target, request, occurrence, text_hash, source_id, source_version, state, reason, transition_seq)
    SELECT k.delivery_key, k.account_id, k.action, k.target, k.request, k.occurrence, k.text_hash, k.source_id, k.source_version, 'pending', 'submitted', 1
    FROM known k
    ON CONFLICT (delivery_key) DO NOTHING
    RETURNING delivery_key, source_id, source_version
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, actor)
    SELECT c.delivery_key, 1, NULL, 'pending', 'submitted', @actor::TEXT FROM created c
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, true FROM hist h
    RETURNING delivery_key
),
heads AS (
    INSERT INTO source_heads (source_id, head_version)
    SELECT DISTINCT ON (c.source_id) c.source_id, c.source_version
    FROM created c
    WHERE c.source_id IS NOT NULL
    ORDER BY c.source_id
    ON CONFLICT (source_id) DO NOTHING
    RETURNING source_id
)
SELECT input.delivery_key::BYTEA AS delivery_key,
       (CASE WHEN o.delivery_key IS NOT NULL THEN 'created'
             WHEN k.delivery_key IS NULL THEN 'unknown_account'
             ELSE 'duplicate' END)::TEXT AS outcome
FROM input
LEFT JOIN known k ON k.delivery_key = input.delivery_key
LEFT JOIN outbox_rows o ON o.delivery_key = input.delivery_key;
