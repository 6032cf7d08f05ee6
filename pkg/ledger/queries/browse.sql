-- name: IntentsBrowse :many
-- The console's page of intents, newest first (by last change, then delivery key, descending),
-- strictly before the cursor (@before_at, @before_key) and changed at @since or later. Every
-- state is read through an index that holds only that state (intents_published_at_idx,
-- intents_parked_at_idx, intents_sweep_idx, intents_lease_expires_idx), each branch written
-- with its state so that it is planned on its partial index, in time order, and merged (Merge
-- Append) so that a page reads only the rows it needs of each: intents_sweep_idx is ordered by
-- time within a state and reason, so pending, failed and indeterminate have one branch per
-- reason of theirs (a test holds the list to pkg/ledger/statemachine.go). @state ('' for every
-- state) switches the other branches off. The window w is the next @scan_rows intents in that order
-- whatever the other filters: reason, account and text are applied to it, so a page never
-- reads more than @scan_rows rows however rare the matches. The row numbered @scan_rows comes
-- back even when it does not match (matched false): it is where the next window starts.
SELECT m.delivery_key, m.account_id, m.action, m.target, m.request, m.occurrence, m.source_id,
       m.state, m.reason, m.transition_seq, m.attempts_authorized, m.attempt_token, m.epoch,
       m.generation, m.lease_expires_at, m.object_id, m.created_at, m.updated_at,
       m.matched::BOOL AS matched, m.n::BIGINT AS n
FROM (
    SELECT w.*,
           ((@reason::TEXT = '' OR w.reason = @reason::TEXT)
            AND (@account_id::TEXT = '' OR w.account_id = @account_id::TEXT)
            AND (@text::TEXT = ''
                 OR strpos(lower(w.request), lower(@text::TEXT)) > 0
                 OR strpos(lower(w.target), lower(@text::TEXT)) > 0
                 OR strpos(lower(w.occurrence), lower(@text::TEXT)) > 0
                 OR coalesce(w.object_id, '') = @text::TEXT)) AS matched,
           row_number() OVER (ORDER BY w.updated_at DESC, w.delivery_key DESC) AS n
    FROM (
        SELECT u.* FROM (
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'published' AND @state::TEXT IN ('', 'published')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'parked' AND @state::TEXT IN ('', 'parked')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'indeterminate' AND reason = 'send_unknown' AND @state::TEXT IN ('', 'indeterminate')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'indeterminate' AND reason = 'readback_mismatch' AND @state::TEXT IN ('', 'indeterminate')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'indeterminate' AND reason = 'lease_expired' AND @state::TEXT IN ('', 'indeterminate')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'indeterminate' AND reason = 'restore_ahead' AND @state::TEXT IN ('', 'indeterminate')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'failed' AND reason = 'connection_failed' AND @state::TEXT IN ('', 'failed')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'failed' AND reason = 'platform_rejected' AND @state::TEXT IN ('', 'failed')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'failed' AND reason = 'kill_switch' AND @state::TEXT IN ('', 'failed')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'failed' AND reason = 'rate_limited' AND @state::TEXT IN ('', 'failed')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'failed' AND reason = 'credential_rotating' AND @state::TEXT IN ('', 'failed')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'failed' AND reason = 'account_disabled' AND @state::TEXT IN ('', 'failed')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'failed' AND reason = 'credential_refused' AND @state::TEXT IN ('', 'failed')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'failed' AND reason = 'credential_revoked' AND @state::TEXT IN ('', 'failed')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'failed' AND reason = 'reconciled_not_sent' AND @state::TEXT IN ('', 'failed')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'failed' AND reason = 'operator_failed' AND @state::TEXT IN ('', 'failed')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'pending' AND reason = 'submitted' AND @state::TEXT IN ('', 'pending')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'pending' AND reason = 'claimed' AND @state::TEXT IN ('', 'pending')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'pending' AND reason = 'abandoned' AND @state::TEXT IN ('', 'pending')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'pending' AND reason = 'retried' AND @state::TEXT IN ('', 'pending')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'pending' AND reason = 'restore_resumed' AND @state::TEXT IN ('', 'pending')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'pending' AND reason = 'held' AND @state::TEXT IN ('', 'pending')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'pending' AND reason = 'awaiting_parent' AND @state::TEXT IN ('', 'pending')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE state = 'pending' AND reason = 'not_due' AND @state::TEXT IN ('', 'pending')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
            UNION ALL
            (SELECT delivery_key, account_id, action, target, request, occurrence, source_id, state, reason,
                    transition_seq, attempts_authorized, attempt_token, epoch, generation, lease_expires_at,
                    object_id, created_at, updated_at
             FROM intents
             WHERE lease_expires_at IS NOT NULL AND state = 'authorized' AND @state::TEXT IN ('', 'authorized')
               AND (updated_at, delivery_key) < (@before_at::TIMESTAMPTZ, @before_key::BYTEA)
               AND updated_at >= @since::TIMESTAMPTZ
             ORDER BY updated_at DESC, delivery_key DESC
             LIMIT @scan_rows::INT)
        ) u
        ORDER BY u.updated_at DESC, u.delivery_key DESC
        LIMIT @scan_rows::INT
    ) w
) m
WHERE m.matched OR m.n = @scan_rows::INT
ORDER BY m.n
LIMIT @max_rows::INT;

-- name: IntentsWaiting :many
-- The intents that are not published, by state and reason, each state counted through the
-- index that holds only it: the overview's table. Published intents are most of the ledger
-- and are not counted here (IntentsChanged counts the recent ones).
SELECT i.state, i.reason, count(*)::BIGINT AS n
FROM intents i WHERE i.state IN ('pending', 'failed', 'indeterminate')
GROUP BY i.state, i.reason
UNION ALL
SELECT 'parked', i.reason, count(*)::BIGINT FROM intents i WHERE i.state = 'parked' GROUP BY i.reason
UNION ALL
SELECT 'authorized', i.reason, count(*)::BIGINT FROM intents i WHERE i.lease_expires_at IS NOT NULL AND i.state = 'authorized' GROUP BY i.reason;

-- name: IntentsChanged :many
-- The intents whose last change was at @since or later, by state and reason: what the last
-- hour did. Through the same indexes as IntentsWaiting, and intents_published_at_idx for the
-- published.
SELECT i.state, i.reason, count(*)::BIGINT AS n
FROM intents i WHERE i.state IN ('pending', 'failed', 'indeterminate') AND i.updated_at >= @since::TIMESTAMPTZ
GROUP BY i.state, i.reason
UNION ALL
SELECT 'parked', i.reason, count(*)::BIGINT FROM intents i WHERE i.state = 'parked' AND i.updated_at >= @since::TIMESTAMPTZ GROUP BY i.reason
UNION ALL
SELECT 'published', i.reason, count(*)::BIGINT FROM intents i WHERE i.state = 'published' AND i.updated_at >= @since::TIMESTAMPTZ GROUP BY i.reason
UNION ALL
SELECT 'authorized', i.reason, count(*)::BIGINT FROM intents i WHERE i.lease_expires_at IS NOT NULL AND i.state = 'authorized' AND i.updated_at >= @since::TIMESTAMPTZ GROUP BY i.reason;
