-- name: IntentsAuthorize :many
-- The before-byte checkpoint, for a batch of claims. The fence first: the intent is pending and claimed by this
-- attempt (token, epoch, generation), the lease is live, the epoch is still current and the
-- request hash is the one the attempt was opened with; a fence failure changes nothing. Then
-- every gate, re-checked here even though the dispatcher looked before Begin: kill switch
-- (global and per account), the account disabled, credential revoked or rotated, platform
-- contract, source still the stored head, attempt cap, rate limit (a token taken from the
-- account's bucket) and the duplicate-text window (the account's claim on the text taken or refreshed). The first refusal
-- ends the attempt in failed (a transient gate: @failed_reasons) or parked (a terminal one);
-- passing them all writes authorized with the in-flight lease.
-- Several intents of one account share its rate bucket: the take hands out as many tokens as
-- the bucket holds, to the intents in key order; several intents of one account with the same
-- text compete for one claim, which the first in key order gets. One row per input key;
-- outcome: authorized | a refusal reason | invalid_transition | lease_lost | fenced |
-- request_mismatch | NULL (no such intent). @now is NULL except in tests that
-- must stand exactly on an edge; the clock is otherwise the database's.
WITH clock AS (
    SELECT coalesce(sqlc.narg(now)::TIMESTAMPTZ, now()) AS now
),
input AS (
    SELECT unnest(@delivery_keys::BYTEA[]) AS delivery_key,
           unnest(@attempt_tokens::BYTEA[]) AS claim_token,
           unnest(@epochs::BIGINT[]) AS claim_epoch,
           unnest(@generations::BIGINT[]) AS claim_generation,
           unnest(@request_hashes::BYTEA[]) AS claim_request_hash
),
cur AS (
    SELECT i.delivery_key, i.account_id, i.state, i.attempt_token, i.epoch, i.generation,
           i.lease_expires_at, i.attempts_authorized, i.transition_seq, i.text_hash,
           i.source_id, i.source_version
    FROM intents i
    WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
    ORDER BY i.delivery_key
    FOR UPDATE
),
facts AS (
    SELECT cur.*,
           input.claim_token, input.claim_epoch, input.claim_generation, input.claim_request_hash,
           att.request_hash,
           att.credential_version AS attempt_credential_version,
           a.credential_version AS account_credential_version,
           a.revoked,
           a.disabled,
           a.contract_version,
           (SELECT max(e.epoch) FROM epochs e) AS current_epoch,
           EXISTS (SELECT 1 FROM switches s WHERE s.scope IN ('', cur.account_id) AND s.engaged) AS switched_off,
           h.head_version,
           coalesce(p.attempt_cap, d.attempt_cap) AS attempt_cap,
           coalesce(p.rate_per_minute, d.rate_per_minute) AS rate_per_minute,
           coalesce(p.rate_burst, d.rate_burst) AS rate_burst,
           coalesce(p.text_window_seconds, d.text_window_seconds) AS text_window_seconds
    FROM cur
    JOIN input ON input.delivery_key = cur.delivery_key
    JOIN accounts a ON a.account_id = cur.account_id
    JOIN policies d ON d.scope = ''
    LEFT JOIN policies p ON p.scope = cur.account_id
    LEFT JOIN attempts att ON att.attempt_token = cur.attempt_token
    LEFT JOIN source_heads h ON h.source_id = cur.source_id
),
fence AS (
    SELECT f.*,
           (CASE
                WHEN f.state <> 'pending' THEN 'invalid_transition'
                WHEN f.attempt_token IS DISTINCT FROM f.claim_token THEN 'lease_lost'
                WHEN f.epoch <> f.claim_epoch OR f.generation <> f.claim_generation THEN 'fenced'
                WHEN f.lease_expires_at IS NULL OR f.lease_expires_at <= (SELECT clock.now FROM clock) THEN 'lease_lost'
                WHEN f.epoch <> f.current_epoch THEN 'fenced'
                WHEN f.request_hash IS DISTINCT FROM f.claim_request_hash THEN 'request_mismatch'
                ELSE 'ok'
            END)::TEXT AS fence
    FROM facts f
),
gates AS (
    SELECT f.*,
           (CASE
                WHEN f.fence <> 'ok' THEN NULL
                WHEN f.switched_off THEN 'kill_switch'
                WHEN f.disabled THEN 'account_disabled'
                WHEN f.revoked THEN 'credential_revoked'
                WHEN f.attempt_credential_version <> f.account_credential_version THEN 'credential_rotating'
                WHEN f.contract_version <> '' AND f.contract_version <> @contract_version::TEXT THEN 'contract_changed'
                WHEN f.source_id IS NOT NULL AND f.head_version IS DISTINCT FROM f.source_version THEN 'superseded_source'
                WHEN f.attempts_authorized >= f.attempt_cap THEN 'attempts_exhausted'
            END)::TEXT AS refusal
    FROM fence f
),
rate_demand AS (
    SELECT g.account_id,
           least(count(*), max(g.rate_burst))::INT AS wanted,
           max(g.rate_per_minute) AS rate_per_minute,
           max(g.rate_burst) AS rate_burst
    FROM gates g
    WHERE g.fence = 'ok' AND g.refusal IS NULL AND g.rate_per_minute > 0
    GROUP BY g.account_id
),
rate AS (
    -- Refill each account's bucket for the time since its last refill, then take as many
    -- tokens as it holds, up to what the batch wants; no row back means the bucket is empty.
    -- One statement, atomic at any isolation level.
    INSERT INTO rate_buckets (account_id, tokens, rate_per_minute, rate_burst, granted, refilled_at)
    SELECT d.account_id, d.rate_burst - d.wanted, d.rate_per_minute, d.rate_burst, d.wanted, (SELECT clock.now FROM clock)
    FROM rate_demand d
    ORDER BY d.account_id -- bucket rows are locked in account order: batches never deadlock
    ON CONFLICT (account_id) DO UPDATE SET
        granted = least(excluded.granted, floor(least(excluded.rate_burst::DOUBLE PRECISION,
                        rate_buckets.tokens + extract(epoch FROM excluded.refilled_at - rate_buckets.refilled_at)::DOUBLE PRECISION * excluded.rate_per_minute / 60.0)))::INT,
        tokens = least(excluded.rate_burst::DOUBLE PRECISION,
                       rate_buckets.tokens + extract(epoch FROM excluded.refilled_at - rate_buckets.refilled_at)::DOUBLE PRECISION * excluded.rate_per_minute / 60.0)
                 - least(excluded.granted, floor(least(excluded.rate_burst::DOUBLE PRECISION,
                        rate_buckets.tokens + extract(epoch FROM excluded.refilled_at - rate_buckets.refilled_at)::DOUBLE PRECISION * excluded.rate_per_minute / 60.0))),
        rate_per_minute = excluded.rate_per_minute,
        rate_burst = excluded.rate_burst,
        refilled_at = excluded.refilled_at
    WHERE least(excluded.rate_burst::DOUBLE PRECISION,
                rate_buckets.tokens + extract(epoch FROM excluded.refilled_at - rate_buckets.refilled_at)::DOUBLE PRECISION * excluded.rate_per_minute / 60.0) >= 1
    RETURNING account_id, granted
),
rated AS (
    -- The intents that got a token: the first `granted` of each account, in key order.
    SELECT ranked.delivery_key
    FROM (
        SELECT g.delivery_key, g.account_id,
               row_number() OVER (PARTITION BY g.account_id ORDER BY g.delivery_key) AS n
        FROM gates g
        WHERE g.fence = 'ok' AND g.refusal IS NULL AND g.rate_per_minute > 0
    ) ranked
    JOIN rate r ON r.account_id = ranked.account_id
    WHERE ranked.n <= r.granted
),
text_candidates AS (
    -- One claim attempt per (account, text): the first intent in key order.
    SELECT DISTINCT ON (g.account_id, g.text_hash) g.account_id, g.text_hash, g.delivery_key, g.text_window_seconds
    FROM gates g
    WHERE g.fence = 'ok' AND g.refusal IS NULL AND g.text_hash IS NOT NULL
      AND (g.rate_per_minute = 0 OR g.delivery_key IN (SELECT r.delivery_key FROM rated r))
    ORDER BY g.account_id, g.text_hash, g.delivery_key
),
text_claim AS (
    -- The duplicate-text window: take the account's claim on this text unless another intent
    -- took it less than the window ago. At exactly the window's edge the text is free again.
    INSERT INTO text_claims (account_id, text_hash, delivery_key, last_at)
    SELECT t.account_id, t.text_hash, t.delivery_key, (SELECT clock.now FROM clock)
    FROM text_candidates t
    ORDER BY t.account_id, t.text_hash -- claim rows are locked in key order too
    ON CONFLICT (account_id, text_hash) DO UPDATE SET
        delivery_key = excluded.delivery_key,
        last_at = excluded.last_at
    WHERE text_claims.delivery_key = excluded.delivery_key
       OR text_claims.last_at <= excluded.last_at - (
              SELECT t.text_window_seconds FROM text_candidates t
              WHERE t.account_id = excluded.account_id AND t.text_hash = excluded.text_hash
          ) * INTERVAL '1 second'
    RETURNING delivery_key
),
verdict AS (
    SELECT g.*,
           (CASE
                WHEN g.fence <> 'ok' THEN g.fence
                WHEN g.refusal IS NOT NULL THEN g.refusal
                WHEN g.rate_per_minute > 0 AND g.delivery_key NOT IN (SELECT r.delivery_key FROM rated r) THEN 'rate_limited'
                WHEN g.text_hash IS NOT NULL AND g.delivery_key NOT IN (SELECT t.delivery_key FROM text_claim t) THEN 'duplicate_text'
                ELSE 'authorized'
            END)::TEXT AS outcome
    FROM gates g
),
changed AS (
    UPDATE intents i SET
        state = (CASE
                     WHEN v.outcome = 'authorized' THEN 'authorized'
                     WHEN v.outcome = ANY(@failed_reasons::TEXT[]) THEN 'failed'
                     ELSE 'parked'
                 END),
        reason = v.outcome,
        lease_expires_at = (CASE WHEN v.outcome = 'authorized' THEN (SELECT clock.now FROM clock) + sqlc.arg(in_flight_ms)::BIGINT * INTERVAL '1 millisecond' END),
        attempts_authorized = i.attempts_authorized + (CASE WHEN v.outcome = 'authorized' THEN 1 ELSE 0 END),
        transition_seq = i.transition_seq + 1,
        updated_at = (SELECT clock.now FROM clock)
    FROM verdict v
    WHERE i.delivery_key = v.delivery_key
      AND v.fence = 'ok'
      -- The fence, on the row being changed. IS TRUE keeps the state and lease tests from
      -- being served by intents_sweep_idx or intents_lease_expires_idx (docs/design.md#the-sql-dialect):
      -- analyzed while few intents were pending, the planner would scan every pending intent
      -- of a burst for each batch.
      AND (i.state = 'pending') IS TRUE
      AND i.attempt_token = v.claim_token
      AND i.epoch = v.claim_epoch
      AND i.generation = v.claim_generation
      AND i.epoch = v.current_epoch
      AND (i.lease_expires_at > (SELECT clock.now FROM clock)) IS TRUE
    RETURNING i.delivery_key, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.lease_expires_at, i.transition_seq
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor)
    SELECT c.delivery_key, c.transition_seq, 'pending', c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT
    FROM changed c
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, false FROM hist h
    RETURNING seq
)
SELECT input.delivery_key::BYTEA AS delivery_key,
       v.outcome AS outcome,
       v.state AS prior_state,
       c.state AS new_state,
       c.lease_expires_at AS lease_expires_at
FROM input
LEFT JOIN verdict v ON v.delivery_key = input.delivery_key
LEFT JOIN changed c ON c.delivery_key = input.delivery_key;
