-- name: DispatchGates :many
-- The dispatcher's cheap look before Begin, per account: its configuration (disabled by an
-- operator included), whether a kill switch (its own or the global one) stops it, its rate
-- (0: unlimited), the tokens its bucket holds now (a bucket never used is full), and its health
-- (serving without a row) with when a probe may next be let through (NULL: none until an
-- operator resumes it or its unknowns are reconciled). Reads only; Begin and Authorize re-check
-- every gate in the statements that decide.
SELECT a.account_id, a.platform, a.settings, a.credential_ref, a.credential_version, a.revoked,
       a.disabled, a.contract_version,
       EXISTS (SELECT 1 FROM switches s WHERE s.scope IN ('', a.account_id) AND s.engaged)::BOOL AS stopped,
       coalesce(p.rate_per_minute, d.rate_per_minute)::INT AS rate_per_minute,
       (CASE
            WHEN b.account_id IS NULL THEN coalesce(p.rate_burst, d.rate_burst)::DOUBLE PRECISION
            ELSE least(coalesce(p.rate_burst, d.rate_burst)::DOUBLE PRECISION,
                       b.tokens + extract(epoch FROM coalesce(sqlc.narg(now)::TIMESTAMPTZ, now()) - b.refilled_at)::DOUBLE PRECISION
                                  * coalesce(p.rate_per_minute, d.rate_per_minute) / 60.0)
        END)::DOUBLE PRECISION AS tokens,
       coalesce(h.state, 'serving')::TEXT AS health_state,
       coalesce(h.cause, '')::TEXT AS health_cause,
       h.next_probe_at, h.probe_until,
       (((h.state = 'holding' AND h.next_probe_at <= coalesce(sqlc.narg(now)::TIMESTAMPTZ, now()))
        OR (h.state = 'probing' AND h.probe_until <= coalesce(sqlc.narg(now)::TIMESTAMPTZ, now()))) IS TRUE)::BOOL AS probe_due
FROM accounts a
CROSS JOIN policies d
LEFT JOIN policies p ON p.scope = a.account_id
LEFT JOIN rate_buckets b ON b.account_id = a.account_id
LEFT JOIN account_health h ON h.account_id = a.account_id
WHERE d.scope = '' AND a.account_id = ANY(@account_ids::TEXT[]);
