-- name: IntentsBegin :many
-- Opens ONE attempt on each pending intent of the batch that holds no live claim: a fresh
-- token, the next generation from the attempt_generation sequence, the current epoch, a
-- pre-authorization lease. An expired earlier claim is closed first (evidence 'abandoned',
-- history 'abandoned'). When the attempt cap is already reached it parks the intent
-- (attempts_exhausted) instead. Rows are reached by primary key and locked in key order, so
-- concurrent batches never deadlock. The account's health gates it too: while the account holds
-- (or probes with another intent), Begin opens no attempt and changes nothing (holding); when a
-- probe is due, one intent per account, the first by key, takes the probe slot (the health row
-- moves to probing with that attempt's token, guarded on the row as read and locked: two
-- dispatchers can never both probe) and is claimed. A suspect account (serving, with definitive
-- failures counted since its last success) has a single slot too: one attempt in flight at a
-- time, taken on the health row the same way (no state change, no control_history row) and
-- freed by that attempt's report (docs/design.md#the-bound-on-sends-to-a-platform-that-is-down).
-- The intent's times gate it as well: at or after expires_at it is parked expired instead of
-- claimed (whatever brought it back to pending: a retry, a held account, a restore), and before
-- not_before Begin opens no attempt and changes nothing (not_due: the row's not_before tells the
-- caller how long to wait). One row per input key; outcome: claim | exhausted | expired |
-- claimed (a live claim exists) | not_due | holding | invalid_transition | NULL (no such
-- intent). Each row also
-- names the transition it wrote, as its event carries it (out_*, seq NULL for none: see
-- outboxed, pkg/ledger/outbox.go); a stale claim's abandonment, written first, comes as one
-- more row (older true).
WITH input AS (
    SELECT unnest(@delivery_keys::BYTEA[]) AS delivery_key,
           unnest(@attempt_tokens::BYTEA[]) AS attempt_token,
           unnest(@request_hashes::BYTEA[]) AS request_hash
),
-- Each intent comes with its request, found by key from the input: joined to the input
-- afterwards, PostgreSQL, estimating both at ten rows, nested the join (128 x 128 comparisons
-- for a batch of 128, a quarter of the statement's CPU).
cur AS (
    SELECT i.delivery_key, i.account_id, i.action, i.state, i.attempt_token, i.epoch,
           i.generation, i.lease_expires_at, i.attempts_authorized, i.attempts_uncounted, i.transition_seq,
           i.not_before, i.expires_at,
           input.attempt_token AS new_token, input.request_hash
    FROM input
    JOIN intents i ON i.delivery_key = input.delivery_key
    ORDER BY i.delivery_key
    FOR UPDATE OF i
),
facts AS (
    SELECT cur.*,
           (SELECT max(e.epoch) FROM epochs e) AS current_epoch,
           a.credential_version,
           coalesce(p.attempt_cap, d.attempt_cap) AS attempt_cap,
           (cur.state = 'pending' AND cur.lease_expires_at IS NOT NULL AND cur.lease_expires_at <= now()) AS stale_claim,
           coalesce(hh.state, 'serving') AS health_state,
           ((hh.state = 'holding' AND hh.next_probe_at <= now()) OR (hh.state = 'probing' AND hh.probe_until <= now())) IS TRUE AS probe_due,
           (hh.state = 'serving' AND hh.failures > 0) IS TRUE AS suspect,
           (hh.state = 'serving' AND hh.failures > 0 AND (hh.probe_token IS NULL OR hh.probe_until <= now())) IS TRUE AS suspect_free
    FROM cur
    JOIN accounts a ON a.account_id = cur.account_id
    JOIN policies d ON d.scope = ''
    LEFT JOIN policies p ON p.scope = cur.account_id
    LEFT JOIN account_health hh ON hh.account_id = cur.account_id
),
probe_pick AS (
    -- Of each account whose probe is due, or suspect with its slot free, the first intent of the
    -- batch that Begin would claim.
    SELECT DISTINCT ON (f.account_id) f.account_id, f.new_token
    FROM facts f
    WHERE (f.probe_due OR f.suspect_free) AND f.state = 'pending' AND (f.lease_expires_at IS NULL OR f.lease_expires_at <= now())
      AND f.attempts_authorized - f.attempts_uncounted < f.attempt_cap
      AND (f.expires_at IS NULL OR f.expires_at > now()) AND (f.not_before IS NULL OR f.not_before <= now())
    ORDER BY f.account_id, f.delivery_key
),
probe_locked AS (
    SELECT h.account_id, h.state, h.cause, h.since, h.version
    FROM account_health h
    WHERE h.account_id IN (SELECT pp.account_id FROM probe_pick pp)
    ORDER BY h.account_id -- health rows are locked in account order: batches never deadlock
    FOR UPDATE
),
probe AS (
    UPDATE account_health h SET
        state = (CASE WHEN h.state = 'serving' THEN 'serving' ELSE 'probing' END),
        probe_token = pp.new_token,
        probe_until = now() + sqlc.arg(lease_ms)::BIGINT * INTERVAL '1 millisecond',
        version = h.version + 1,
        updated_at = now()
    FROM probe_locked l
    JOIN probe_pick pp ON pp.account_id = l.account_id
    WHERE h.account_id = l.account_id
      -- The probe's single slot, on the row as read and locked: a holding account whose probe
      -- is due, or a probing one whose probe's lease ran out.
      AND h.version = l.version
      AND ((h.state = 'holding' AND h.next_probe_at <= now()) OR (h.state = 'probing' AND h.probe_until <= now())
           -- A suspect account's single slot: free, or its holder's lease ran out.
           OR (h.state = 'serving' AND h.failures > 0 AND (h.probe_token IS NULL OR h.probe_until <= now())))
    RETURNING h.account_id, h.state, h.probe_token, h.probe_until
),
probe_hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'health', pr.account_id, @actor::TEXT, l.cause,
           jsonb_build_object('state', l.state, 'cause', l.cause, 'since', l.since),
           jsonb_build_object('state', 'probing', 'cause', l.cause, 'probe_until', pr.probe_until)
    FROM probe pr
    JOIN probe_locked l ON l.account_id = pr.account_id
    WHERE pr.state = 'probing'
    RETURNING control_id
),
verdict AS (
    SELECT f.*,
           (CASE
                WHEN f.state <> 'pending' THEN 'invalid_transition'
                WHEN f.lease_expires_at > now() THEN 'claimed'
                WHEN f.expires_at <= now() THEN 'expired'
                WHEN f.not_before > now() THEN 'not_due'
                WHEN f.attempts_authorized - f.attempts_uncounted >= f.attempt_cap THEN 'exhausted'
                WHEN f.health_state <> 'serving' AND f.new_token NOT IN (SELECT pr.probe_token FROM probe pr) THEN 'holding'
                WHEN f.suspect AND f.new_token NOT IN (SELECT pr.probe_token FROM probe pr) THEN 'holding'
                ELSE 'claim'
            END)::TEXT AS outcome
    FROM facts f
),
changed AS (
    UPDATE intents i SET
        state = (CASE WHEN v.outcome = 'claim' THEN 'pending' ELSE 'parked' END),
        reason = (CASE v.outcome WHEN 'claim' THEN 'claimed' WHEN 'expired' THEN 'expired' ELSE 'attempts_exhausted' END),
        attempt_token = (CASE WHEN v.outcome = 'claim' THEN v.new_token ELSE i.attempt_token END),
        epoch = (CASE WHEN v.outcome = 'claim' THEN v.current_epoch ELSE i.epoch END),
        generation = (CASE WHEN v.outcome = 'claim' THEN nextval('attempt_generation') ELSE i.generation END),
        lease_expires_at = (CASE WHEN v.outcome = 'claim' THEN now() + sqlc.arg(lease_ms)::BIGINT * INTERVAL '1 millisecond' END),
        transition_seq = i.transition_seq + (CASE WHEN v.stale_claim THEN 2 ELSE 1 END),
        updated_at = now()
    FROM verdict v
    WHERE i.delivery_key = v.delivery_key
      AND v.outcome IN ('claim', 'exhausted', 'expired')
      -- The guard, on the row being changed: pending, no live claim, expires_at decides
      -- whether it parks expired, not_before that it is due, and the cap decides between
      -- claiming and parking. IS TRUE keeps intents_sweep_idx from serving the
      -- state test (docs/design.md#the-sql-dialect): analyzed while few intents were pending, the planner
      -- would scan every pending intent of a burst for each batch.
      AND (i.state = 'pending') IS TRUE
      AND (i.lease_expires_at IS NULL OR i.lease_expires_at <= now())
      AND ((i.expires_at <= now()) IS TRUE) = (v.outcome = 'expired')
      AND (i.not_before IS NULL OR i.not_before <= now())
      AND (v.outcome = 'expired' OR (i.attempts_authorized - i.attempts_uncounted >= v.attempt_cap) = (v.outcome = 'exhausted'))
    -- With what the rows below need of the verdict (the attempt's request and credential; the
    -- stale claim and the attempt it closes, as they were): joined to verdict again, PostgreSQL,
    -- estimating both at one row, nested each join (128 x 128 comparisons for a batch of 128).
    RETURNING i.delivery_key, i.state, i.attempt_token, i.epoch, i.generation, i.lease_expires_at, i.transition_seq,
              i.account_id, i.action, v.request_hash, v.credential_version,
              v.stale_claim, v.attempt_token AS prior_token, v.epoch AS prior_epoch, v.generation AS prior_generation,
              v.transition_seq AS prior_seq, i.reason, i.traceparent
),
new_attempt AS (
    INSERT INTO attempts (attempt_token, delivery_key, account_id, action, request_hash, credential_version, epoch, generation)
    SELECT c.attempt_token, c.delivery_key, c.account_id, c.action, c.request_hash, c.credential_version, c.epoch, c.generation
    FROM changed c
    WHERE c.state = 'pending'
    RETURNING attempt_token
),
abandoned AS (
    INSERT INTO attempt_evidence (attempt_token, delivery_key, epoch, generation, outcome, reason, fenced)
    SELECT c.prior_token, c.delivery_key, c.prior_epoch, c.prior_generation, 'abandoned', 'abandoned', false
    FROM changed c
    WHERE c.stale_claim
    RETURNING evidence_id
),
hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor)
    SELECT c.delivery_key, c.prior_seq + 1, 'pending', 'pending', 'abandoned', c.prior_token, c.prior_epoch, c.prior_generation, @actor::TEXT
    FROM changed c
    WHERE c.stale_claim
    UNION ALL
    SELECT c.delivery_key, c.transition_seq, 'pending', c.state, c.reason,
           c.attempt_token, c.epoch, c.generation, @actor::TEXT
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
       v.credential_version AS credential_version,
       c.state AS new_state,
       c.attempt_token AS attempt_token,
       c.epoch AS epoch,
       c.generation AS generation,
       c.lease_expires_at AS lease_expires_at,
       EXISTS (SELECT 1 FROM new_attempt n WHERE n.attempt_token = c.attempt_token) AS attempt_written,
       false AS older,
       v.not_before AS not_before,
       c.transition_seq AS out_seq, false AS out_dispatch, c.account_id AS out_account,
       'pending'::TEXT AS out_from, c.state AS out_to, c.reason AS out_reason,
       c.attempt_token AS out_token, c.epoch AS out_epoch, c.generation AS out_generation,
       @actor::TEXT AS out_actor, now()::TIMESTAMPTZ AS out_at, c.traceparent AS out_traceparent
FROM input
LEFT JOIN verdict v ON v.delivery_key = input.delivery_key
LEFT JOIN changed c ON c.delivery_key = input.delivery_key
UNION ALL
-- The abandoned transition a stale claim's closing wrote first.
SELECT c.delivery_key, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, false, true, NULL,
       c.prior_seq + 1, false, c.account_id, 'pending', 'pending', 'abandoned', c.prior_token, c.prior_epoch, c.prior_generation,
       @actor::TEXT, now()::TIMESTAMPTZ, c.traceparent
FROM changed c
WHERE c.stale_claim;

-- name: IntentsOwnClaims :many
-- The claims among @attempt_tokens that stand: after a Begin whose answer was lost (a
-- connection cut during COMMIT), the caller, who minted the tokens, learns which claims are its
-- own and goes on with them at once, instead of leaving them to expire with their lease. A claim
-- whose lease ran out is no longer anyone's.
SELECT i.delivery_key, i.attempt_token, i.epoch, i.generation, i.lease_expires_at::TIMESTAMPTZ AS lease_expires_at,
       a.credential_version
FROM intents i
JOIN attempts a ON a.attempt_token = i.attempt_token
WHERE i.delivery_key = ANY(@delivery_keys::BYTEA[])
  AND i.attempt_token = ANY(@attempt_tokens::BYTEA[])
  AND (i.state = 'pending' AND i.reason = 'claimed') IS TRUE -- by primary key, never through intents_sweep_idx (docs/design.md#the-sql-dialect)
  AND i.lease_expires_at > now();
