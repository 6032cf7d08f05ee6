-- name: IntentRestore :one
-- After a ledger restore: brings one intent up to what ATMOST_EVENTS shows happened to it after
-- the backup point. @seqs, @from_states, @to_states, @attempt_tokens ('' for none), @epochs and
-- @generations (0 for none) are the intent's transitions on the stream, in any order. Only the
-- transitions AHEAD of the ledger (seq above its transition_seq; every one of them when the
-- ledger lacks the intent) count, and the verdict is taken here, on the locked row:
--   a published transition ahead                       -> published (restore_published)
--   an authorization ahead (to or from authorized), the stream's latest state authorized or
--   indeterminate, and an attempt named                -> indeterminate (restore_ahead), that attempt
--   an authorization ahead, the stream went on from it  -> parked (restore_parked): its steps are lost
--   no authorization ahead, the stream's latest pending -> pending (restore_resumed): nothing can
--                                                          have been sent since (the witness rule)
--   anything else                                       -> parked (restore_parked)
-- An intent the ledger does not hold at all is created from its envelope (@has_envelope) in
-- that state. The new transition is numbered one past the stream's highest, so its event id is
-- new. Nothing changes (to_state '') when the ledger is not behind the stream, when it holds the
-- intent as published (it never leaves published), or when the intent is missing and so is its
-- envelope or its account. to_state is the verdict; moved says whether it was written.
WITH ev AS (
    SELECT unnest(@seqs::BIGINT[]) AS seq,
           unnest(@from_states::TEXT[]) AS from_state,
           unnest(@to_states::TEXT[]) AS to_state,
           unnest(@attempt_tokens::BYTEA[]) AS attempt_token,
           unnest(@epochs::BIGINT[]) AS epoch,
           unnest(@generations::BIGINT[]) AS generation
),
cur AS (
    SELECT i.delivery_key, i.state, i.transition_seq
    FROM intents i
    WHERE i.delivery_key = @delivery_key::BYTEA
    FOR UPDATE
),
base AS (
    SELECT coalesce((SELECT c.transition_seq FROM cur c), 0)::BIGINT AS seq,
           (SELECT c.state FROM cur c) AS state
),
ahead AS (
    SELECT ev.* FROM ev, base b WHERE ev.seq > b.seq
),
latest AS (
    SELECT a.to_state FROM ahead a ORDER BY a.seq DESC LIMIT 1
),
attempt AS (
    SELECT a.attempt_token, a.epoch, a.generation
    FROM ahead a
    WHERE octet_length(a.attempt_token) = 16 AND a.epoch > 0 AND a.generation > 0
    ORDER BY a.seq DESC LIMIT 1
),
facts AS (
    SELECT b.seq AS ledger_seq,
           b.state AS ledger_state,
           coalesce((SELECT max(ev.seq) FROM ev), 0)::BIGINT AS stream_seq,
           (SELECT l.to_state FROM latest l) AS stream_state,
           EXISTS (SELECT 1 FROM ahead a WHERE a.to_state = 'published') AS published_ahead,
           EXISTS (SELECT 1 FROM ahead a WHERE a.to_state = 'authorized' OR a.from_state = 'authorized') AS authorized_ahead,
           (SELECT count(*) FROM ahead a WHERE a.to_state = 'authorized')::INT AS authorizations_ahead,
           EXISTS (SELECT 1 FROM accounts acc WHERE acc.account_id = @account_id::TEXT) AS account_known
    FROM base b
),
verdict AS (
    SELECT f.*,
           t.attempt_token AS stream_attempt_token,
           t.epoch AS stream_epoch,
           t.generation AS stream_generation,
           (CASE
                WHEN f.ledger_seq >= f.stream_seq THEN NULL
                WHEN f.ledger_state = 'published' THEN NULL
                WHEN f.ledger_state IS NULL AND NOT (@has_envelope::BOOL AND f.account_known) THEN NULL
                WHEN f.published_ahead THEN 'published'
                WHEN f.authorized_ahead AND f.stream_state IN ('authorized', 'indeterminate') AND t.attempt_token IS NOT NULL THEN 'indeterminate'
                WHEN f.authorized_ahead THEN 'parked'
                WHEN f.stream_state = 'pending' THEN 'pending'
                ELSE 'parked'
            END)::TEXT AS to_state
    FROM facts f
    LEFT JOIN attempt t ON true
),
target AS (
    SELECT v.*,
           (CASE v.to_state
                WHEN 'published' THEN 'restore_published'
                WHEN 'indeterminate' THEN 'restore_ahead'
                WHEN 'pending' THEN 'restore_resumed'
                ELSE 'restore_parked'
            END)::TEXT AS to_reason
    FROM verdict v
    WHERE v.to_state IS NOT NULL
),
changed AS (
    UPDATE intents i SET
        state = t.to_state,
        reason = t.to_reason,
        transition_seq = t.stream_seq + 1,
        lease_expires_at = NULL,
        attempt_token = (CASE WHEN t.to_state = 'indeterminate' THEN t.stream_attempt_token ELSE i.attempt_token END),
        epoch = (CASE WHEN t.to_state = 'indeterminate' THEN t.stream_epoch ELSE i.epoch END),
        generation = (CASE WHEN t.to_state = 'indeterminate' THEN t.stream_generation ELSE i.generation END),
        attempts_authorized = i.attempts_authorized + t.authorizations_ahead,
        updated_at = now()
    FROM target t
    WHERE i.delivery_key = @delivery_key::BYTEA
      -- The guard, on the row being changed: only an intent behind the stream, never out of
      -- published, back to pending only when nothing ahead was authorized or published, and
      -- to indeterminate only with the attempt whose outcome is unknown.
      AND i.transition_seq = t.ledger_seq
      AND i.transition_seq < t.stream_seq
      AND i.state <> 'published'
      AND (t.to_state <> 'pending' OR (NOT t.authorized_ahead AND NOT t.published_ahead AND t.stream_state = 'pending'))
      AND (t.to_state <> 'indeterminate' OR t.stream_attempt_token IS NOT NULL)
    RETURNING i.delivery_key, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.transition_seq
),
created AS (
    INSERT INTO intents (delivery_key, account_id, action, target, request, occurrence, text_hash, source_id, source_version,
                         state, reason, transition_seq, attempts_authorized, attempt_token, epoch, generation)
    SELECT @delivery_key::BYTEA, @account_id::TEXT, @action::TEXT, @target::TEXT, @request::TEXT, @occurrence::TEXT,
           NULLIF(@text_hash::BYTEA, ''::BYTEA), NULLIF(@source_id::TEXT, ''), NULLIF(@source_version::BYTEA, ''::BYTEA),
           t.to_state, t.to_reason, t.stream_seq + 1, t.authorizations_ahead,
           (CASE WHEN t.to_state = 'indeterminate' THEN t.stream_attempt_token END),
           (CASE WHEN t.to_state = 'indeterminate' THEN t.stream_epoch END),
           (CASE WHEN t.to_state = 'indeterminate' THEN t.stream_generation END)
    FROM target t
    WHERE t.ledger_state IS NULL
      AND @has_envelope::BOOL
      AND t.account_known
      -- The same guard for an intent the ledger lacks: all of its transitions are ahead.
      AND (t.to_state <> 'pending' OR (NOT t.authorized_ahead AND NOT t.published_ahead AND t.stream_state = 'pending'))
      AND (t.to_state <> 'indeterminate' OR t.stream_attempt_token IS NOT NULL)
    ON CONFLICT (delivery_key) DO NOTHING
    RETURNING delivery_key, state, reason, attempt_token, epoch, generation, transition_seq, source_id, source_version
),
moved AS (
    SELECT c.delivery_key, c.state, c.reason, c.attempt_token, c.epoch, c.generation, c.transition_seq FROM changed c
    UNION ALL
    SELECT c.delivery_key, c.state, c.reason, c.attempt_token, c.epoch, c.generation, c.transition_seq FROM created c
),
facts_json AS (
    -- The ledger's and the stream's points, for the history row's detail.
    SELECT row_to_json(r)::JSONB AS facts
    FROM (SELECT t.ledger_seq, t.stream_seq, t.stream_state, t.authorizations_ahead FROM target t) r
),
hist AS (
    -- From the ledger's state, or, for an intent the ledger lacked, from the stream's latest:
    -- the transition continues the history the stream holds.
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    SELECT m.delivery_key, m.transition_seq, coalesce(t.ledger_state, t.stream_state), m.state, m.reason,
           m.attempt_token, m.epoch, m.generation, @actor::TEXT,
           @detail::JSONB || f.facts
    FROM moved m CROSS JOIN target t CROSS JOIN facts_json f
    RETURNING delivery_key, seq, to_state
),
outbox_rows AS (
    -- A resumed intent is work again: its outbox row also asks for dispatch.
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, h.to_state = 'pending' FROM hist h
    RETURNING seq
),
heads AS (
    -- A created intent's source version becomes the stored head as Submit would make it: a
    -- version the ledger has seen before never becomes head again.
    INSERT INTO source_heads (source_id, head_version)
    SELECT c.source_id, c.source_version
    FROM created c
    WHERE c.source_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM intents i WHERE i.source_id = c.source_id AND i.source_version = c.source_version)
    ON CONFLICT (source_id) DO UPDATE SET
        previous_version = source_heads.head_version,
        head_version = excluded.head_version,
        updated_at = now()
    WHERE source_heads.head_version <> excluded.head_version
      AND source_heads.previous_version IS DISTINCT FROM excluded.head_version
    RETURNING source_id
)
SELECT coalesce(v.to_state, '')::TEXT AS to_state,
       v.ledger_seq,
       coalesce(v.ledger_state, '')::TEXT AS ledger_state,
       v.stream_seq,
       coalesce(v.stream_state, '')::TEXT AS stream_state,
       v.account_known,
       EXISTS (SELECT 1 FROM moved) AS moved,
       coalesce((SELECT m.transition_seq FROM moved m), 0)::BIGINT AS new_seq
FROM verdict v;
