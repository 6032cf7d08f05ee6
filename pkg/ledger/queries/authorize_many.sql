-- name: IntentsAuthorize :many
-- The before-byte checkpoint, for a batch of claims. The fence first: the intent is pending and claimed by this
-- attempt (token, epoch, generation), the lease is live, the epoch is still current and the
-- request hash is the one the attempt was opened with; a fence failure changes nothing. Then
-- every gate, re-checked here even though the dispatcher looked before Begin: kill switch
-- (global and per account), the account disabled, credential revoked or rotated, platform
-- contract, the account's health, the intent's times (at or after expires_at it parks expired;
-- before not_before the claim ends and it waits pending, not_due, spending no attempt), source
-- still the stored head, attempt cap (counting only the
-- attempts authorized while the account served), rate limit (a token taken from the
-- account's bucket) and the duplicate-text window (the account's claim on the text taken or refreshed). The first refusal
-- ends the attempt in failed (a transient gate: @failed_reasons) or parked (a terminal one),
-- except the account's health: while it holds, or probes with another attempt, or is suspect
-- (serving with definitive failures counted) and another attempt holds its single slot, the
-- claim ends and the intent waits pending (held), spending no attempt, as a reply does whose
-- parent is not published yet (awaiting_parent; dependency_unmet, parked, when the parent is
-- parked); passing them all writes authorized with the in-flight lease (the slot then lasts as
-- long as the lease; a probe's attempt is not counted against the cap). The health rows are
-- locked FOR SHARE, so that a report that counts a failure waits for this statement's commit or
-- is seen by it: no claim opened before an account's first failure is authorized after it
-- (docs/design.md#the-bound-on-sends-to-a-platform-that-is-down).
-- Several intents of one account share its rate bucket: the take hands out as many tokens as
-- the bucket holds, to the intents in stored order (created_at, batch_ord, delivery_key); of
-- the intents of one account with the same text, the one stored first that still waits to be
-- sent wins the claim (docs/design.md#the-duplicate-text-window), and a refusal's history
-- detail names the holder and when the window ends. One row per input key;
-- outcome: authorized | a refusal reason | invalid_transition | lease_lost | fenced |
-- request_mismatch | NULL (no such intent). @now is NULL except in tests that
-- must stand exactly on an edge; the clock is otherwise the database's. Each row also names
-- the transition it wrote, as its event carries it (out_*, seq NULL for none: see outboxed,
-- pkg/ledger/outbox.go).
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
           i.lease_expires_at, i.attempts_authorized, i.attempts_uncounted, i.transition_seq, i.text_hash,
           i.source_id, i.source_version, i.created_at, i.batch_ord, i.reply_to, i.not_before, i.expires_at
    FROM intents i
    WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
    ORDER BY i.delivery_key
    FOR UPDATE
),
claimed AS (
    -- Each intent with its claim, planned on its own (OFFSET 0): joined among the tables of
    -- facts, PostgreSQL rescanned input for every intent (128 x 128 rows for a batch of 128).
    SELECT cur.*,
           input.claim_token, input.claim_epoch, input.claim_generation, input.claim_request_hash
    FROM cur
    JOIN input ON input.delivery_key = cur.delivery_key
    OFFSET 0
),
health AS (
    -- The accounts' health rows, locked FOR SHARE: at READ COMMITTED, a row a concurrent report
    -- changed is read as that report committed it.
    SELECT h.account_id, h.state, h.failures, h.probe_token
    FROM account_health h
    WHERE h.account_id IN (SELECT cur.account_id FROM cur)
    ORDER BY h.account_id
    FOR SHARE
),
facts AS (
    SELECT cur.*,
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
           coalesce(p.text_window_seconds, d.text_window_seconds) AS text_window_seconds,
           coalesce(p.retryable_reasons, d.retryable_reasons) AS retryable_reasons,
           coalesce(hh.state, 'serving') AS health_state,
           (hh.state = 'serving' AND hh.failures > 0) IS TRUE AS suspect,
           (hh.state IN ('probing', 'serving') AND hh.probe_token = cur.claim_token) IS TRUE AS probe,
           -- A probe's attempt, and a suspect account's single attempt, are sent to a platform
           -- already seen failing: neither counts against the intent's cap.
           (hh.state IN ('probing', 'serving') AND hh.probe_token = cur.claim_token) IS TRUE AS uncounted,
           (SELECT par.state FROM intents par WHERE par.delivery_key = cur.reply_to) AS parent_state
    FROM claimed cur
    JOIN accounts a ON a.account_id = cur.account_id
    JOIN policies d ON d.scope = ''
    LEFT JOIN policies p ON p.scope = cur.account_id
    LEFT JOIN attempts att ON att.attempt_token = cur.attempt_token
    LEFT JOIN source_heads h ON h.source_id = cur.source_id
    LEFT JOIN health hh ON hh.account_id = cur.account_id
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
                WHEN f.expires_at <= (SELECT clock.now FROM clock) THEN 'expired'
                WHEN f.not_before > (SELECT clock.now FROM clock) THEN 'not_due'
                -- A reply (reply_to) is sent only once its parent is published, to the object the
                -- parent created: until then the claim ends and it waits, spending no attempt;
                -- a parked parent parks it. Published is terminal, so a parent read published
                -- here stays so until the send.
                WHEN f.reply_to IS NOT NULL AND f.parent_state IS DISTINCT FROM 'published' THEN
                    (CASE WHEN f.parent_state = 'parked' THEN 'dependency_unmet' ELSE 'awaiting_parent' END)
                WHEN f.switched_off THEN 'kill_switch'
                WHEN f.disabled THEN 'account_disabled'
                WHEN f.revoked THEN 'credential_revoked'
                WHEN f.health_state <> 'serving' AND NOT f.probe THEN 'held'
                WHEN f.suspect AND NOT f.probe THEN 'held'
                WHEN f.attempt_credential_version <> f.account_credential_version THEN 'credential_rotating'
                WHEN f.contract_version <> '' AND f.contract_version <> @contract_version::TEXT THEN 'contract_changed'
                WHEN f.source_id IS NOT NULL AND f.head_version IS DISTINCT FROM f.source_version THEN 'superseded_source'
                WHEN f.attempts_authorized - f.attempts_uncounted >= f.attempt_cap THEN 'attempts_exhausted'
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
    -- The intents that got a token: the first `granted` of each account, in stored order, so
    -- that of two intents with one text the earlier is never the one left without a token.
    SELECT ranked.delivery_key
    FROM (
        SELECT g.delivery_key, g.account_id,
               row_number() OVER (PARTITION BY g.account_id ORDER BY g.created_at, g.batch_ord, g.delivery_key) AS n
        FROM gates g
        WHERE g.fence = 'ok' AND g.refusal IS NULL AND g.rate_per_minute > 0
    ) ranked
    JOIN rate r ON r.account_id = ranked.account_id
    WHERE ranked.n <= r.granted
),
text_candidates AS (
    -- One claim attempt per (account, text): of the intents of the batch that passed every
    -- gate and hold a rate token, the one stored first.
    SELECT DISTINCT ON (g.account_id, g.text_hash) g.account_id, g.text_hash, g.delivery_key, g.created_at, g.batch_ord,
           g.text_window_seconds, g.attempt_cap, g.retryable_reasons
    FROM gates g
    WHERE g.fence = 'ok' AND g.refusal IS NULL AND g.text_hash IS NOT NULL
      AND (g.rate_per_minute = 0 OR g.delivery_key IN (SELECT r.delivery_key FROM rated r))
    ORDER BY g.account_id, g.text_hash, g.created_at, g.batch_ord, g.delivery_key
),
text_earlier AS (
    -- Across batches: an intent of the account with the same text, stored before the
    -- candidate, that still waits to be sent will come to authorization and win the text, so
    -- the candidate does not take it. Waiting is read from the statement's snapshot: pending, or
    -- failed for a reason the account's policy retries, below the attempt cap, and resting on
    -- its source's stored head (or on no source). An intent of this very batch counts by the
    -- same snapshot: the earlier ones a gate refuses now are either refused with the candidate
    -- (the switches, the credential, the contract are the account's), excluded here (a moved
    -- head, the cap) or will be retried (a rotated credential). Of several, the first stored is
    -- named as the holder. Through intents_text_idx. It carries the candidate's columns, so
    -- that what follows reads it alone: a join of two of these CTEs, each estimated at one
    -- row, is nested by PostgreSQL, and a batch of 128 compared 128 x 128 rows per join.
    SELECT t.account_id, t.text_hash, t.delivery_key, t.text_window_seconds,
           (SELECT o.delivery_key
            FROM intents o
            LEFT JOIN source_heads oh ON oh.source_id = o.source_id
            WHERE o.account_id = t.account_id AND o.text_hash = t.text_hash
              AND o.state IN ('pending', 'failed')
              AND (o.state = 'pending' OR o.reason = ANY(@always_retried::TEXT[]) OR o.reason = ANY(t.retryable_reasons))
              AND o.attempts_authorized - o.attempts_uncounted < t.attempt_cap
              AND (o.source_id IS NULL OR oh.head_version = o.source_version)
              AND (o.created_at, o.batch_ord, o.delivery_key) < (t.created_at, t.batch_ord, t.delivery_key)
            ORDER BY o.created_at, o.batch_ord, o.delivery_key
            LIMIT 1) AS holder
    FROM text_candidates t
),
text_claim AS (
    -- The duplicate-text window: take the account's claim on this text unless another intent
    -- took it less than the window ago. At exactly the window's edge the text is free again.
    -- The row is written either way, so that RETURNING names who holds the text now, even when
    -- it is an intent whose claim committed after this statement's snapshot.
    INSERT INTO text_claims (account_id, text_hash, delivery_key, last_at)
    SELECT e.account_id, e.text_hash, e.delivery_key, (SELECT clock.now FROM clock)
    FROM text_earlier e
    WHERE e.holder IS NULL
    ORDER BY e.account_id, e.text_hash -- claim rows are locked in key order too
    ON CONFLICT (account_id, text_hash) DO UPDATE SET
        delivery_key = (CASE
            WHEN text_claims.delivery_key = excluded.delivery_key
              OR text_claims.last_at <= excluded.last_at - (
                     SELECT t.text_window_seconds FROM text_candidates t
                     WHERE t.account_id = excluded.account_id AND t.text_hash = excluded.text_hash
                 ) * INTERVAL '1 second'
            THEN excluded.delivery_key ELSE text_claims.delivery_key END),
        last_at = (CASE
            WHEN text_claims.delivery_key = excluded.delivery_key
              OR text_claims.last_at <= excluded.last_at - (
                     SELECT t.text_window_seconds FROM text_candidates t
                     WHERE t.account_id = excluded.account_id AND t.text_hash = excluded.text_hash
                 ) * INTERVAL '1 second'
            THEN excluded.last_at ELSE text_claims.last_at END)
    RETURNING account_id, text_hash, delivery_key, last_at
),
text_won AS (
    -- The candidates that hold their text now: the claim row names them. IS TRUE keeps the IN
    -- a hashed subplan, text_claim read once, rather than a join PostgreSQL would nest.
    SELECT t.delivery_key
    FROM text_candidates t
    WHERE ((t.account_id, t.text_hash, t.delivery_key) IN (SELECT c.account_id, c.text_hash, c.delivery_key FROM text_claim c)) IS TRUE
),
text_held AS MATERIALIZED (
    -- Who holds each text the batch contended for, for the detail of those refused: the
    -- earlier intent that waits (its window begins when it is authorized), or the claim's
    -- holder and the end of its window. Read only for a duplicate_text refusal (see hist), so
    -- computed only in a batch that has one; MATERIALIZED: computed once, not per refusal
    -- (inlined, PostgreSQL rejoined it for every changed intent: a batch of 128 rescanned its
    -- joins 16,384 times, 1,100 intents/s in BenchmarkLifecycleBatch instead of 6,000).
    SELECT e.account_id, e.text_hash, coalesce(e.holder, c.delivery_key) AS holder,
           (CASE WHEN e.holder IS NULL THEN c.last_at + e.text_window_seconds * INTERVAL '1 second' END) AS window_ends_at,
           e.text_window_seconds
    FROM text_earlier e
    LEFT JOIN text_claim c ON c.account_id = e.account_id AND c.text_hash = e.text_hash
),
verdict AS (
    SELECT g.*,
           (CASE
                WHEN g.fence <> 'ok' THEN g.fence
                WHEN g.refusal IS NOT NULL THEN g.refusal
                WHEN g.rate_per_minute > 0 AND g.delivery_key NOT IN (SELECT r.delivery_key FROM rated r) THEN 'rate_limited'
                WHEN g.text_hash IS NOT NULL AND g.delivery_key NOT IN (SELECT w.delivery_key FROM text_won w) THEN 'duplicate_text'
                ELSE 'authorized'
            END)::TEXT AS outcome
    FROM gates g
),
changed AS (
    UPDATE intents i SET
        state = (CASE
                     WHEN v.outcome = 'authorized' THEN 'authorized'
                     WHEN v.outcome IN ('held', 'awaiting_parent', 'not_due') THEN 'pending'
                     WHEN v.outcome = ANY(@failed_reasons::TEXT[]) THEN 'failed'
                     ELSE 'parked'
                 END),
        reason = v.outcome,
        lease_expires_at = (CASE WHEN v.outcome = 'authorized' THEN (SELECT clock.now FROM clock) + sqlc.arg(in_flight_ms)::BIGINT * INTERVAL '1 millisecond' END),
        attempts_authorized = i.attempts_authorized + (CASE WHEN v.outcome = 'authorized' THEN 1 ELSE 0 END),
        attempts_uncounted = i.attempts_uncounted + (CASE WHEN v.outcome = 'authorized' AND v.uncounted THEN 1 ELSE 0 END),
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
    RETURNING i.delivery_key, i.account_id, i.text_hash, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.lease_expires_at, i.transition_seq, i.traceparent,
              v.probe
),
probe_lease AS (
    -- The authorized probe (or suspect account's single attempt) keeps its slot while its
    -- in-flight lease lasts: no second one while the first may still be sending.
    UPDATE account_health h SET probe_until = c.lease_expires_at, version = h.version + 1, updated_at = now()
    FROM changed c
    WHERE h.account_id = c.account_id AND c.state = 'authorized' AND c.probe
      AND h.state IN ('probing', 'serving') AND h.probe_token = c.attempt_token
    RETURNING h.account_id
),
slot_freed AS (
    -- A suspect account's slot whose claim a gate refused here: nothing will be sent or
    -- reported, so the slot is free for the next attempt at once, not when the claim's lease
    -- would have run out.
    UPDATE account_health h SET probe_token = NULL, probe_until = NULL, version = h.version + 1, updated_at = now()
    FROM changed c
    WHERE h.account_id = c.account_id AND c.state <> 'authorized' AND c.probe
      AND h.state = 'serving' AND h.probe_token = c.attempt_token
    RETURNING h.account_id
),
held AS (
    -- A held (or not yet due) claim's attempt ends as an abandoned one does: nothing was
    -- authorized or sent.
    INSERT INTO attempt_evidence (attempt_token, delivery_key, epoch, generation, outcome, reason, fenced)
    SELECT c.attempt_token, c.delivery_key, c.epoch, c.generation, 'abandoned', c.reason, false
    FROM changed c
    WHERE c.reason IN ('held', 'awaiting_parent', 'not_due')
    RETURNING evidence_id
),
hist AS (
    -- A duplicate_text refusal says which intent holds the text ("holder", a delivery key) and
    -- when the window ends ("window_ends_at", null while the holder waits for its
    -- authorization, which starts it; "window_seconds" long): Transition.TextHold reads it. A
    -- subquery under the CASE, not a join: only a refusal reads text_held.
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    SELECT c.delivery_key, c.transition_seq, 'pending', c.state, c.reason, c.attempt_token, c.epoch, c.generation, @actor::TEXT,
           (CASE WHEN c.reason = 'duplicate_text' THEN
                coalesce((SELECT jsonb_build_object('holder', 'dk1:' || encode(th.holder, 'hex'), 'window_ends_at', th.window_ends_at,
                                                    'window_seconds', th.text_window_seconds)
                          FROM text_held th WHERE th.account_id = c.account_id AND th.text_hash = c.text_hash), '{}'::JSONB)
            ELSE '{}'::JSONB END)
    FROM changed c
    RETURNING delivery_key, seq
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch, writer)
    SELECT h.delivery_key, h.seq, false, NULLIF(@writer::BIGINT, 0) FROM hist h
    RETURNING seq
)
SELECT input.delivery_key::BYTEA AS delivery_key,
       v.outcome AS outcome,
       v.state AS prior_state,
       c.state AS new_state,
       c.lease_expires_at AS lease_expires_at,
       c.transition_seq AS out_seq, false AS out_dispatch, c.account_id AS out_account,
       'pending'::TEXT AS out_from, c.state AS out_to, c.reason AS out_reason,
       c.attempt_token AS out_token, c.epoch AS out_epoch, c.generation AS out_generation,
       @actor::TEXT AS out_actor, now()::TIMESTAMPTZ AS out_at, c.traceparent AS out_traceparent
FROM input
LEFT JOIN verdict v ON v.delivery_key = input.delivery_key
LEFT JOIN changed c ON c.delivery_key = input.delivery_key;
