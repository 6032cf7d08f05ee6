-- name: AccountHealthEnsure :exec
-- Gives each account of @account_ids a health row (serving) if it has none, so that the
-- statements that change health have a row to lock and compare. Writes nothing for an account
-- that has one.
INSERT INTO account_health (account_id)
SELECT a.account_id FROM accounts a WHERE a.account_id = ANY(@account_ids::TEXT[])
ORDER BY a.account_id
ON CONFLICT (account_id) DO NOTHING;

-- name: AccountHealthReport :many
-- Feeds the outcomes of a batch of completions to each account's health, in the transaction
-- that recorded them. A signal is ok (the platform took the send, or refused it for its content:
-- it is up), unavailable (a definitive failure that says it cannot take anything now: no
-- connection, 429, 503), auth (the credential was refused: 401, 403 as the adapter declares),
-- unknown, or neutral (the dispatcher's own not-sent: a send it refused to start says nothing of
-- the platform, and changes nothing but the slot below). While serving, the consecutive definitive failures are counted (an ok in the batch
-- starts the count again from the batch's failures) and trip_failures of them hold the account:
-- auth_failed when any was an authentication failure (held until an operator resumes it: waiting
-- will not fix a credential), platform_unavailable otherwise (probed after probe_base_ms). An
-- unknown outcome holds it (unknown_outcomes, no probe) when more than trip_unknowns of its intents
-- became indeterminate within trip_window_seconds and are still so. While probing, the probe's
-- own outcome decides: ok serves again, auth holds for an operator, anything else holds again
-- with the wait multiplied by backoff_factor (at most probe_max_ms); a neutral probe leaves the
-- slot to its lease. A suspect account's single slot (see IntentsBegin) is freed by its
-- attempt's report, whatever the signal. Other outcomes reported
-- while the account holds (sends authorized before it tripped) change nothing. The guard is a
-- compare-and-set: the row is locked, and changed only at the version it was read at. Every
-- change of state is a control_history row (kind health). One row per account of the input;
-- change: trip | reopen | heal | count | none.
WITH input AS (
    SELECT unnest(@account_ids::TEXT[]) AS account_id,
           unnest(@attempt_tokens::BYTEA[]) AS attempt_token,
           unnest(@signals::TEXT[]) AS signal
),
per AS (
    SELECT n.account_id,
           sum(CASE WHEN n.signal = 'ok' THEN 1 ELSE 0 END)::INT AS oks,
           sum(CASE WHEN n.signal IN ('unavailable', 'auth') THEN 1 ELSE 0 END)::INT AS fails,
           sum(CASE WHEN n.signal = 'auth' THEN 1 ELSE 0 END)::INT AS auths,
           sum(CASE WHEN n.signal = 'unknown' THEN 1 ELSE 0 END)::INT AS unknowns
    FROM input n
    GROUP BY n.account_id
),
cur AS (
    SELECT h.account_id, h.state, h.cause, h.since, h.failures, h.trips, h.next_probe_at, h.probe_token, h.version
    FROM account_health h
    WHERE h.account_id IN (SELECT per.account_id FROM per)
    ORDER BY h.account_id
    FOR UPDATE
),
facts AS (
    SELECT cur.*, per.oks, per.fails, per.auths, per.unknowns,
           (CASE WHEN per.oks > 0 THEN per.fails ELSE cur.failures + per.fails END) AS failures_after,
           (SELECT n.signal FROM input n WHERE n.account_id = cur.account_id AND n.attempt_token = cur.probe_token LIMIT 1) AS probe_signal,
           (CASE WHEN per.unknowns > 0 THEN
                (SELECT count(*) FROM intents i
                 WHERE i.account_id = cur.account_id AND i.state = 'indeterminate'
                   AND i.updated_at > now() - coalesce(p.trip_window_seconds, d.trip_window_seconds) * INTERVAL '1 second')
            ELSE 0 END)::INT AS recent_unknowns,
           coalesce(p.trip_failures, d.trip_failures)::INT AS trip_failures,
           coalesce(p.trip_unknowns, d.trip_unknowns)::INT AS trip_unknowns,
           coalesce(p.probe_base_ms, d.probe_base_ms)::BIGINT AS probe_base_ms,
           coalesce(p.probe_max_ms, d.probe_max_ms)::BIGINT AS probe_max_ms,
           coalesce(p.backoff_factor, d.backoff_factor)::DOUBLE PRECISION AS backoff_factor
    FROM cur
    JOIN per ON per.account_id = cur.account_id
    JOIN policies d ON d.scope = ''
    LEFT JOIN policies p ON p.scope = cur.account_id
),
verdict AS (
    SELECT f.*,
           (CASE
                WHEN f.state = 'probing' AND f.probe_signal = 'ok' THEN 'heal'
                WHEN f.state = 'probing' AND f.probe_signal = 'auth' THEN 'trip'
                WHEN f.state = 'probing' AND f.probe_signal IN ('unavailable', 'unknown') THEN 'reopen'
                WHEN f.state <> 'serving' THEN 'none'
                WHEN f.failures_after >= f.trip_failures THEN 'trip'
                WHEN f.recent_unknowns > f.trip_unknowns THEN 'trip'
                WHEN f.failures_after <> f.failures THEN 'count'
                -- The suspect account's slot holder reported: its slot is free for the next.
                WHEN f.probe_signal IS NOT NULL THEN 'count'
                ELSE 'none'
            END)::TEXT AS change,
           (CASE
                WHEN f.probe_signal = 'auth' OR (f.state = 'serving' AND f.failures_after >= f.trip_failures AND f.auths > 0) THEN 'auth_failed'
                WHEN f.state = 'serving' AND f.failures_after < f.trip_failures AND f.recent_unknowns > f.trip_unknowns THEN 'unknown_outcomes'
                ELSE 'platform_unavailable'
            END)::TEXT AS new_cause
    FROM facts f
),
changed AS (
    UPDATE account_health h SET
        state = (CASE WHEN v.change = 'heal' THEN 'serving' WHEN v.change = 'count' THEN 'serving' ELSE 'holding' END),
        cause = (CASE WHEN v.change IN ('heal', 'count') THEN '' WHEN v.change = 'reopen' THEN 'platform_unavailable' ELSE v.new_cause END),
        since = (CASE WHEN v.change = 'count' THEN h.since ELSE now() END),
        failures = (CASE WHEN v.change = 'count' THEN v.failures_after ELSE 0 END),
        trips = (CASE WHEN v.change = 'reopen' THEN h.trips + 1 ELSE 0 END),
        next_probe_at = (CASE
                             WHEN v.change IN ('heal', 'count') OR v.new_cause <> 'platform_unavailable' THEN NULL
                             ELSE now() + least(v.probe_base_ms::DOUBLE PRECISION
                                                    * power(v.backoff_factor, least((CASE WHEN v.change = 'reopen' THEN h.trips + 1 ELSE 0 END), 30)::DOUBLE PRECISION),
                                                v.probe_max_ms::DOUBLE PRECISION) * INTERVAL '1 millisecond'
                         END),
        probe_token = NULL,
        probe_until = NULL,
        version = h.version + 1,
        updated_at = now()
    FROM verdict v
    WHERE h.account_id = v.account_id
      AND v.change <> 'none'
      -- The guard: the row as it was read and locked, and a change its state allows.
      AND h.version = v.version
      AND (h.state = 'probing') = (v.change IN ('heal', 'reopen') OR (v.change = 'trip' AND v.probe_signal IS NOT NULL AND v.state = 'probing'))
    RETURNING h.account_id, h.state, h.cause, h.since, h.next_probe_at, h.failures
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'health', c.account_id, @actor::TEXT, c.cause,
           jsonb_build_object('state', v.state, 'cause', v.cause, 'since', v.since),
           jsonb_build_object('state', c.state, 'cause', c.cause, 'next_probe_at', c.next_probe_at,
                              'failures', v.failures_after, 'unknowns', v.recent_unknowns)
    FROM changed c
    JOIN verdict v ON v.account_id = c.account_id
    WHERE v.change <> 'count'
    RETURNING control_id
)
SELECT v.account_id::TEXT AS account_id, v.change AS change, v.state AS prior_state,
       c.state AS new_state, c.cause AS cause, c.next_probe_at AS next_probe_at
FROM verdict v
LEFT JOIN changed c ON c.account_id = v.account_id;

-- name: AccountHealthResume :one
-- An operator's word: a holding or probing account serves again, whatever its cause (a rotated
-- credential, reconciled unknowns, a platform the operator knows is back). The guard: the row as
-- read and locked, and only from holding or probing; written to control_history with who and
-- why. outcome: resumed | serving (nothing to resume) | unknown_account.
WITH account AS (
    SELECT EXISTS (SELECT 1 FROM accounts a WHERE a.account_id = @account_id::TEXT)::BOOL AS known
),
cur AS (
    SELECT h.account_id, h.state, h.cause, h.since, h.version
    FROM account_health h
    WHERE h.account_id = @account_id::TEXT
    FOR UPDATE
),
changed AS (
    UPDATE account_health h SET
        state = 'serving', cause = '', since = now(), failures = 0, trips = 0, next_probe_at = NULL,
        probe_token = NULL, probe_until = NULL, version = h.version + 1, updated_at = now()
    FROM cur
    WHERE h.account_id = cur.account_id
      AND h.version = cur.version
      AND h.state IN ('holding', 'probing')
    RETURNING h.account_id, h.since
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'health', c.account_id, @actor::TEXT, @reason::TEXT,
           (SELECT jsonb_build_object('state', cur.state, 'cause', cur.cause, 'since', cur.since) FROM cur),
           jsonb_build_object('state', 'serving', 'cause', 'operator')
    FROM changed c
    RETURNING control_id
)
SELECT (CASE
            WHEN NOT a.known THEN 'unknown_account'
            WHEN c.account_id IS NOT NULL THEN 'resumed'
            ELSE 'serving'
        END)::TEXT AS outcome,
       coalesce(cur.state, 'serving')::TEXT AS prior_state,
       coalesce(cur.cause, '')::TEXT AS prior_cause
FROM account a
LEFT JOIN cur ON true
LEFT JOIN changed c ON true;

-- name: AccountHealthHeal :many
-- The sweeper's pass: an account held for unknown outcomes serves again once its intents still
-- indeterminate (of any age) are trip_unknowns or fewer, reconciled by the one lookup each or by
-- an operator. The guard is the compare-and-set of AccountHealthReport; each heal is a
-- control_history row. Returns the accounts healed.
WITH cand AS (
    SELECT h.account_id, h.version, h.since
    FROM account_health h
    JOIN policies d ON d.scope = ''
    LEFT JOIN policies p ON p.scope = h.account_id
    WHERE h.state = 'holding' AND h.cause = 'unknown_outcomes'
      AND (SELECT count(*) FROM intents i WHERE i.account_id = h.account_id AND i.state = 'indeterminate')
          <= coalesce(p.trip_unknowns, d.trip_unknowns)
    ORDER BY h.account_id
    FOR UPDATE OF h
),
changed AS (
    UPDATE account_health h SET
        state = 'serving', cause = '', since = now(), failures = 0, trips = 0, next_probe_at = NULL,
        probe_token = NULL, probe_until = NULL, version = h.version + 1, updated_at = now()
    FROM cand
    WHERE h.account_id = cand.account_id
      AND h.version = cand.version
      AND h.state = 'holding' AND h.cause = 'unknown_outcomes'
    RETURNING h.account_id
),
hist AS (
    INSERT INTO control_history (kind, scope, actor, reason, before, after)
    SELECT 'health', c.account_id, @actor::TEXT, 'unknowns_reconciled',
           jsonb_build_object('state', 'holding', 'cause', 'unknown_outcomes', 'since', cand.since),
           jsonb_build_object('state', 'serving', 'cause', '')
    FROM changed c
    JOIN cand ON cand.account_id = c.account_id
    RETURNING control_id
)
SELECT c.account_id::TEXT AS account_id FROM changed c ORDER BY c.account_id;

-- name: AccountHealthList :many
-- Every account's health (serving, without a row), with its intents waiting pending: for
-- `atmost accounts ls/show`, the console and the atmost_account_health gauge.
SELECT a.account_id, coalesce(h.state, 'serving')::TEXT AS state, coalesce(h.cause, '')::TEXT AS cause,
       h.since AS since, h.next_probe_at AS next_probe_at, coalesce(h.failures, 0)::INT AS failures,
       coalesce(h.trips, 0)::INT AS trips
FROM accounts a
LEFT JOIN account_health h ON h.account_id = a.account_id
WHERE (cardinality(@account_ids::TEXT[]) = 0 OR a.account_id = ANY(@account_ids::TEXT[]))
ORDER BY a.account_id;

-- name: HealthChangesSince :many
-- The changes of accounts' health recorded after @since, oldest first, at most @max_rows: what
-- the sweeper's alerts tell (a trip, a heal). Through control_history_at_idx.
SELECT h.control_id::TEXT AS control_id, h.scope AS account_id, h.actor, h.reason,
       coalesce(h.before ->> 'state', '')::TEXT AS before_state,
       coalesce(h.after ->> 'state', '')::TEXT AS after_state,
       coalesce(h.after ->> 'cause', '')::TEXT AS after_cause,
       coalesce(h.after ->> 'next_probe_at', '')::TEXT AS next_probe_at,
       h.at
FROM control_history h
WHERE h.at > @since::TIMESTAMPTZ AND h.kind = 'health'
ORDER BY h.at, h.control_id
LIMIT @max_rows::INT;

-- name: ParkedSince :many
-- The intents parked after @since, oldest first, at most @max_rows: what the sweeper's alerts
-- tell. Through intents_parked_at_idx.
SELECT i.delivery_key, i.account_id, i.reason, i.transition_seq, i.updated_at
FROM intents i
WHERE i.state = 'parked' AND i.updated_at > @since::TIMESTAMPTZ
ORDER BY i.updated_at, i.delivery_key
LIMIT @max_rows::INT;
