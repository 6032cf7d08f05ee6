-- name: IntentAuthorize :one
-- The before-byte checkpoint. The fence first: the intent is pending and claimed by this
-- attempt (token, epoch, generation), the lease is live, the epoch is still current and the
-- request hash is the one the attempt was opened with; a fence failure changes nothing. Then
-- every gate, re-checked here even though the dispatcher looked before Begin: kill switch
-- (global and per account), credential revoked or rotated, platform contract, source still
-- the stored head, attempt cap, rate limit (a token taken from the account's bucket) and the
-- duplicate-text window (the account's claim on the text taken or refreshed). The first refusal
-- ends the attempt in failed (a transient gate: @failed_reasons) or parked (a terminal one);
-- passing them all writes authorized with the in-flight lease.
-- outcome: authorized | a refusal reason | invalid_transition | lease_lost | fenced |
-- request_mismatch; no row when the intent does not exist. @now is NULL except in tests that
-- must stand exactly on an edge; the clock is otherwise the database's.
WITH clock AS (
    SELECT coalesce(sqlc.narg(now)::TIMESTAMPTZ, now()) AS now
),
cur AS (
    SELECT i.delivery_key, i.account_id, i.state, i.attempt_token, i.epoch, i.generation,
           i.lease_expires_at, i.attempts_authorized, i.transition_seq, i.text_hash,
           i.source_id, i.source_version
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA
    FOR UPDATE
),
facts AS (
    SELECT cur.*,
           att.request_hash,
           att.credential_version AS attempt_credential_version,
           a.credential_version AS account_credential_version,
           a.revoked,
           a.contract_version,
           (SELECT max(e.epoch) FROM epochs e) AS current_epoch,
           EXISTS (SELECT 1 FROM switches s WHERE s.scope IN ('', cur.account_id) AND s.engaged) AS switched_off,
           h.head_version,
           coalesce(p.attempt_cap, d.attempt_cap) AS attempt_cap,
           coalesce(p.rate_per_minute, d.rate_per_minute) AS rate_per_minute,
           coalesce(p.rate_burst, d.rate_burst) AS rate_burst,
           coalesce(p.text_window_seconds, d.text_window_seconds) AS text_window_seconds
    FROM cur
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
                WHEN f.attempt_token IS DISTINCT FROM @attempt_token::BYTEA THEN 'lease_lost'
                WHEN f.epoch <> @epoch::BIGINT OR f.generation <> @generation::BIGINT THEN 'fenced'
                WHEN f.lease_expires_at IS NULL OR f.lease_expires_at <= (SELECT clock.now FROM clock) THEN 'lease_lost'
                WHEN f.epoch <> f.current_epoch THEN 'fenced'
                WHEN f.request_hash IS DISTINCT FROM @request_hash::BYTEA THEN 'request_mismatch'
                ELSE 'ok'
            END)::TEXT AS fence
    FROM facts f
),
gates AS (
    SELECT f.*,
           (CASE
                WHEN f.fence <> 'ok' THEN NULL
                WHEN f.switched_off THEN 'kill_switch'
                WHEN f.revoked THEN 'credential_revoked'
                WHEN f.attempt_credential_version <> f.account_credential_version THEN 'credential_rotating'
                WHEN f.contract_version <> '' AND f.contract_version <> @contract_version::TEXT THEN 'contract_changed'
                WHEN f.source_id IS NOT NULL AND f.head_version IS DISTINCT FROM f.source_version THEN 'superseded_source'
                WHEN f.attempts_authorized >= f.attempt_cap THEN 'attempts_exhausted'
            END)::TEXT AS refusal
    FROM fence f
),
rate AS (
    -- Refill the account's bucket for the time since its last refill, then take one token;
    -- no row back means the bucket is empty. One statement, atomic at any isolation level.
    INSERT INTO rate_buckets (account_id, tokens, rate_per_minute, rate_burst, refilled_at)
    SELECT g.account_id, g.rate_burst - 1, g.rate_per_minute, g.rate_burst, (SELECT clock.now FROM clock)
    FROM gates g
    WHERE g.fence = 'ok' AND g.refusal IS NULL AND g.rate_per_minute > 0
    ON CONFLICT (account_id) DO UPDATE SET
        tokens = least(excluded.rate_burst::DOUBLE PRECISION,
                       rate_buckets.tokens + extract(epoch FROM excluded.refilled_at - rate_buckets.refilled_at)::DOUBLE PRECISION * excluded.rate_per_minute / 60.0) - 1,
        rate_per_minute = excluded.rate_per_minute,
        rate_burst = excluded.rate_burst,
        refilled_at = excluded.refilled_at
    WHERE least(excluded.rate_burst::DOUBLE PRECISION,
                rate_buckets.tokens + extract(epoch FROM excluded.refilled_at - rate_buckets.refilled_at)::DOUBLE PRECISION * excluded.rate_per_minute / 60.0) >= 1
    RETURNING account_id
),
text_claim AS (
    -- The duplicate-text window: take the account's claim on this text unless another intent
    -- took it less than the window ago. At exactly the window's edge the text is free again.
    INSERT INTO text_claims (account_id, text_hash, delivery_key, last_at)
    SELECT g.account_id, g.text_hash, g.delivery_key, (SELECT clock.now FROM clock)
    FROM gates g
    WHERE g.fence = 'ok' AND g.refusal IS NULL AND g.text_hash IS NOT NULL
      AND (g.rate_per_minute = 0 OR EXISTS (SELECT 1 FROM rate))
    ON CONFLICT (account_id, text_hash) DO UPDATE SET
        delivery_key = excluded.delivery_key,
        last_at = excluded.last_at
    WHERE text_claims.delivery_key = excluded.delivery_key
       OR text_claims.last_at <= excluded.last_at - (SELECT g.text_window_seconds FROM gates g) * INTERVAL '1 second'
    RETURNING delivery_key
),
verdict AS (
    SELECT g.*,
           (CASE
                WHEN g.fence <> 'ok' THEN g.fence
                WHEN g.refusal IS NOT NULL THEN g.refusal
                WHEN g.rate_per_minute > 0 AND NOT EXISTS (SELECT 1 FROM rate) THEN 'rate_limited'
                WHEN g.text_hash IS NOT NULL AND NOT EXISTS (SELECT 1 FROM text_claim) THEN 'duplicate_text'
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
      -- The fence, on the row being changed.
      AND i.state = 'pending'
      AND i.attempt_token = @attempt_token::BYTEA
      AND i.epoch = @epoch::BIGINT
      AND i.generation = @generation::BIGINT
      AND i.epoch = v.current_epoch
      AND i.lease_expires_at > (SELECT clock.now FROM clock)
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
SELECT v.outcome::TEXT AS outcome,
       v.state::TEXT AS prior_state,
       c.state AS new_state,
       c.lease_expires_at AS lease_expires_at
FROM verdict v
LEFT JOIN changed c ON true;
