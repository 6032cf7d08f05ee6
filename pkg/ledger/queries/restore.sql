-- name: IntentRestoreVerdict :one
-- After a ledger restore, Ledger.Restore brings one intent up to what ATMOST_EVENTS shows
-- happened to it after the backup point, in ONE transaction of separate statements (CockroachDB
-- refuses a statement that modifies the same table twice): IntentRestoreVerdict locks the row
-- and takes the verdict; IntentRestoreUpdate (the ledger holds the intent) or
-- IntentRestoreCreate (it lacks it) writes it, each restating every guard on the row it
-- changes; IntentRestoreRecord appends the history and outbox rows and re-takes the
-- duplicate-text claim. A key the restore cannot recreate is blocked (IntentRestoreBlock).
--
-- seqs, from_states, to_states, attempt_tokens ('' for none), epochs and generations
-- (0 for none) are the intent's transitions on the stream, in any order. Only the transitions
-- AHEAD of the ledger (seq above its transition_seq; every one of them when the ledger lacks
-- the intent) count, and the verdict is taken on the row locked here:
--   a published transition ahead                       -> published (restore_published)
--   an authorization ahead (to or from authorized), the stream's latest state authorized or
--   indeterminate, and an attempt named                -> indeterminate (restore_ahead), that attempt
--   an authorization ahead, the stream went on from it  -> parked (restore_parked): its steps are lost
--   no authorization ahead, the stream's latest pending -> pending (restore_resumed): nothing can
--                                                          have been sent since (the witness rule)
--   anything else                                       -> parked (restore_parked)
-- Nothing changes (to_state '') when the ledger is not behind the stream, when it holds the
-- intent as published (it never leaves published), or when the intent is missing and so is
-- its envelope or its account.
WITH ev AS (
    SELECT unnest(@seqs::BIGINT[]) AS seq,
           unnest(@from_states::TEXT[]) AS from_state,
           unnest(@to_states::TEXT[]) AS to_state,
           unnest(@attempt_tokens::BYTEA[]) AS attempt_token,
           unnest(@epochs::BIGINT[]) AS epoch,
           unnest(@generations::BIGINT[]) AS generation
),
cur AS (
    SELECT i.delivery_key, i.state, i.transition_seq, i.text_hash
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
)
SELECT (CASE
            WHEN f.ledger_seq >= f.stream_seq THEN ''
            WHEN f.ledger_state = 'published' THEN ''
            WHEN f.ledger_state IS NULL AND NOT (@has_envelope::BOOL AND f.account_known) THEN ''
            WHEN f.published_ahead THEN 'published'
            WHEN f.authorized_ahead AND f.stream_state IN ('authorized', 'indeterminate') AND t.attempt_token IS NOT NULL THEN 'indeterminate'
            WHEN f.authorized_ahead THEN 'parked'
            WHEN f.stream_state = 'pending' THEN 'pending'
            ELSE 'parked'
        END)::TEXT AS to_state,
       f.ledger_seq,
       coalesce(f.ledger_state, '')::TEXT AS ledger_state,
       f.stream_seq,
       coalesce(f.stream_state, '')::TEXT AS stream_state,
       f.account_known,
       f.authorizations_ahead,
       coalesce(t.attempt_token, ''::BYTEA)::BYTEA AS stream_attempt_token,
       coalesce(t.epoch, 0)::BIGINT AS stream_epoch,
       coalesce(t.generation, 0)::BIGINT AS stream_generation
FROM facts f
LEFT JOIN attempt t ON true;

-- name: IntentRestoreUpdate :one
-- Moves an intent the ledger holds to to_state, as IntentRestoreVerdict decided on the locked
-- row. The guard is restated here, on the row being changed, from the stream's transitions
-- themselves: only an intent at the ledger point the verdict saw and behind the stream, never
-- out of published, back to pending only when nothing ahead of the row was authorized or
-- published and the stream's latest is pending, and to indeterminate only with an attempt.
WITH ev AS (
    SELECT unnest(@seqs::BIGINT[]) AS seq,
           unnest(@from_states::TEXT[]) AS from_state,
           unnest(@to_states::TEXT[]) AS to_state
),
t AS (
    SELECT @to_state::TEXT AS to_state,
           @to_reason::TEXT AS to_reason,
           @ledger_seq::BIGINT AS ledger_seq,
           @stream_seq::BIGINT AS stream_seq,
           @stream_attempt_token::BYTEA AS attempt_token,
           @stream_epoch::BIGINT AS epoch,
           @stream_generation::BIGINT AS generation,
           @authorizations_ahead::INT AS authorizations_ahead
)
UPDATE intents i SET
    state = t.to_state,
    reason = t.to_reason,
    transition_seq = t.stream_seq + 1,
    lease_expires_at = NULL,
    attempt_token = (CASE WHEN t.to_state = 'indeterminate' THEN t.attempt_token ELSE i.attempt_token END),
    epoch = (CASE WHEN t.to_state = 'indeterminate' THEN t.epoch ELSE i.epoch END),
    generation = (CASE WHEN t.to_state = 'indeterminate' THEN t.generation ELSE i.generation END),
    attempts_authorized = i.attempts_authorized + t.authorizations_ahead,
    updated_at = now()
FROM t
WHERE i.delivery_key = @delivery_key::BYTEA
  AND i.transition_seq = t.ledger_seq
  AND i.transition_seq < t.stream_seq
  AND i.state <> 'published'
  AND (t.to_state <> 'pending' OR (
          NOT EXISTS (SELECT 1 FROM ev WHERE ev.seq > i.transition_seq
                      AND (ev.to_state IN ('authorized', 'published') OR ev.from_state = 'authorized'))
          AND (SELECT ev.to_state FROM ev WHERE ev.seq > i.transition_seq ORDER BY ev.seq DESC LIMIT 1) = 'pending'))
  AND (t.to_state <> 'indeterminate' OR (octet_length(t.attempt_token) = 16 AND t.epoch > 0 AND t.generation > 0))
RETURNING i.delivery_key, i.account_id, i.state, i.reason, i.attempt_token, i.epoch, i.generation, i.transition_seq, i.text_hash;

-- name: IntentRestoreCreate :one
-- Creates an intent the ledger lacks from its envelope, in to_state, as IntentRestoreVerdict
-- decided. The same guard, restated for an intent all of whose transitions are ahead: its
-- account exists, pending only when nothing on the stream was authorized or published and the
-- stream's latest is pending, indeterminate only with an attempt. A created intent's source
-- version becomes the stored head as Submit would make it (a version the ledger has seen
-- before never becomes head again; the statement's snapshot does not see its own insert).
WITH ev AS (
    SELECT unnest(@seqs::BIGINT[]) AS seq,
           unnest(@from_states::TEXT[]) AS from_state,
           unnest(@to_states::TEXT[]) AS to_state
),
t AS (
    SELECT @to_state::TEXT AS to_state,
           @to_reason::TEXT AS to_reason,
           @stream_seq::BIGINT AS stream_seq,
           @stream_attempt_token::BYTEA AS attempt_token,
           @stream_epoch::BIGINT AS epoch,
           @stream_generation::BIGINT AS generation,
           @authorizations_ahead::INT AS authorizations_ahead
),
created AS (
    INSERT INTO intents (delivery_key, account_id, action, target, request, occurrence, text_hash, source_id, source_version, reply_to,
                         not_before, expires_at, state, reason, transition_seq, attempts_authorized, attempt_token, epoch, generation)
    SELECT @delivery_key::BYTEA, @account_id::TEXT, @action::TEXT, @target::TEXT, @request::TEXT, @occurrence::TEXT,
           NULLIF(@text_hash::BYTEA, ''::BYTEA), NULLIF(@source_id::TEXT, ''), NULLIF(@source_version::BYTEA, ''::BYTEA),
           NULLIF(@reply_to::BYTEA, ''::BYTEA),
           -- The envelope's times come back with it: a restored intent that has expired is never sent.
           NULLIF(@not_before::TEXT, '')::TIMESTAMPTZ, NULLIF(@expires_at::TEXT, '')::TIMESTAMPTZ,
           t.to_state, t.to_reason, t.stream_seq + 1, t.authorizations_ahead,
           (CASE WHEN t.to_state = 'indeterminate' THEN t.attempt_token END),
           (CASE WHEN t.to_state = 'indeterminate' THEN t.epoch END),
           (CASE WHEN t.to_state = 'indeterminate' THEN t.generation END)
    FROM t
    WHERE EXISTS (SELECT 1 FROM accounts acc WHERE acc.account_id = @account_id::TEXT)
      AND t.stream_seq = (SELECT max(ev.seq) FROM ev)
      AND (t.to_state <> 'pending' OR (
              NOT EXISTS (SELECT 1 FROM ev WHERE ev.to_state IN ('authorized', 'published') OR ev.from_state = 'authorized')
              AND (SELECT ev.to_state FROM ev ORDER BY ev.seq DESC LIMIT 1) = 'pending'))
      AND (t.to_state <> 'indeterminate' OR (octet_length(t.attempt_token) = 16 AND t.epoch > 0 AND t.generation > 0))
    ON CONFLICT (delivery_key) DO NOTHING
    RETURNING delivery_key, account_id, state, reason, attempt_token, epoch, generation, transition_seq, text_hash, source_id, source_version
),
heads AS (
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
SELECT c.delivery_key, c.account_id, c.state, c.reason, c.attempt_token, c.epoch, c.generation, c.transition_seq, c.text_hash
FROM created c;

-- name: IntentRestoreRecord :one
-- The restore's transition, written after IntentRestoreUpdate or IntentRestoreCreate changed
-- the row: its history row (from the ledger's state, or, for an intent the ledger lacked, from
-- the stream's latest: the transition continues the history the stream holds; the detail, built
-- by Ledger.Restore, names the ledger's and the stream's points), its outbox row (a resumed intent is work again: it
-- also asks for dispatch), and, for an intent restored to anything but pending, the account's
-- duplicate-text claim re-taken: the claim its authorization took after the backup is not in
-- the restored ledger. It is taken whatever holds it, and its time only ever moves forward
-- (the authorization's own time is not known; the restore's is later, so the window is longer,
-- never shorter). The history row is the row the statement inserts, so history_rows is 1.
WITH hist AS (
    INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, detail)
    VALUES (@delivery_key::BYTEA, @seq::BIGINT, @from_state::TEXT, @to_state::TEXT, @reason::TEXT,
            sqlc.narg(attempt_token)::BYTEA, sqlc.narg(epoch)::BIGINT, sqlc.narg(generation)::BIGINT, @actor::TEXT,
            @detail::JSONB)
    RETURNING delivery_key, seq, to_state
),
outbox_rows AS (
    INSERT INTO outbox (delivery_key, seq, dispatch)
    SELECT h.delivery_key, h.seq, h.to_state = 'pending' FROM hist h
    RETURNING seq
),
text_claim AS (
    INSERT INTO text_claims (account_id, text_hash, delivery_key, last_at)
    SELECT @account_id::TEXT, sqlc.narg(text_hash)::BYTEA, h.delivery_key, now()
    FROM hist h
    WHERE sqlc.narg(text_hash)::BYTEA IS NOT NULL
      AND h.to_state IN ('published', 'indeterminate', 'parked')
    ON CONFLICT (account_id, text_hash) DO UPDATE SET
        delivery_key = excluded.delivery_key,
        last_at = greatest(text_claims.last_at, excluded.last_at)
    RETURNING delivery_key
)
SELECT (SELECT count(*) FROM hist)::INT AS history_rows,
       (SELECT count(*) FROM text_claim)::INT AS text_claims;

-- name: IntentRestoreBlock :exec
-- Blocks a delivery key the stream knows but the restore cannot recreate (its envelope aged
-- out of ATMOST_INTENTS, or the restored ledger lacks its account): Submit reports a key in
-- restore_blocks as a duplicate, so a producer publishing it again never creates a pending
-- intent for something that may already have been sent.
INSERT INTO restore_blocks (delivery_key, account_id, reason, actor, stream_seq, stream_state)
VALUES (@delivery_key::BYTEA, @account_id::TEXT, @reason::TEXT, @actor::TEXT, @stream_seq::BIGINT, @stream_state::TEXT)
ON CONFLICT (delivery_key) DO NOTHING;

-- name: RestoreLedgerPoint :one
-- What the restored ledger says about its backup point and its epochs: the newest history row
-- written by anything but a restore (a lower bound on the backup time; has_history false when
-- there is none), the current epoch and when it began, when the newest other epoch began
-- (has_other_epochs), and how many history rows not written by a restore already carry the
-- current epoch (a dispatcher of that epoch already worked). Times absent are 1970-01-01.
WITH cur AS (
    SELECT e.epoch, e.created_at FROM epochs e ORDER BY e.epoch DESC LIMIT 1
),
hist AS (
    SELECT max(h.at) AS at FROM history h WHERE h.reason NOT IN ('restore_published', 'restore_ahead', 'restore_resumed', 'restore_parked')
),
others AS (
    SELECT max(e.created_at) AS at FROM epochs e, cur c WHERE e.epoch <> c.epoch
)
SELECT c.epoch AS current_epoch,
       c.created_at AS current_epoch_at,
       (o.at IS NOT NULL)::BOOL AS has_other_epochs,
       coalesce(o.at, '1970-01-01T00:00:00Z'::TIMESTAMPTZ)::TIMESTAMPTZ AS other_epochs_at,
       (hi.at IS NOT NULL)::BOOL AS has_history,
       coalesce(hi.at, '1970-01-01T00:00:00Z'::TIMESTAMPTZ)::TIMESTAMPTZ AS newest_history_at,
       (SELECT count(*) FROM history h WHERE h.epoch = c.epoch AND h.reason NOT IN ('restore_published', 'restore_ahead', 'restore_resumed', 'restore_parked'))::BIGINT AS current_epoch_history
FROM cur c, hist hi, others o;

-- name: RestoreRecordedWitness :one
-- The restored ledger's witness that a replay of ATMOST_EVENTS reaches back to its backup: of
-- the attempts it holds published by the dispatcher (authorized -> published, reason
-- published, same attempt, the evidence row the publication wrote), the one whose evidence
-- names the highest stream sequence: JetStream acknowledged the attempt's authorized event
-- there before the send, and the send came before the publication the backup holds, so the
-- message at that sequence was stored before the backup, and every transition the backup
-- lacks was stored after it. The highest is the latest such point, so the replay reads the
-- least. No row when none names one (a backup written before witness_seq existed).
SELECT a.delivery_key::BYTEA AS delivery_key, a.seq::BIGINT AS seq, a.attempt_token::BYTEA AS attempt_token,
       e.witness_seq::BIGINT AS witness_seq
FROM attempt_evidence e
JOIN history p ON p.delivery_key = e.delivery_key AND p.attempt_token = e.attempt_token
JOIN history a ON a.delivery_key = p.delivery_key AND a.seq = p.seq - 1
WHERE e.witness_seq IS NOT NULL AND e.outcome = 'success' AND NOT e.fenced
  AND p.from_state = 'authorized' AND p.to_state = 'published' AND p.reason = 'published'
  AND a.to_state = 'authorized' AND a.attempt_token = e.attempt_token
ORDER BY e.witness_seq DESC
LIMIT 1;

-- name: RestoreWitness :many
-- For a restored ledger that names no recorded witness (RestoreRecordedWitness: a backup
-- written before witness_seq existed): of the authorized events a replay of the whole of
-- ATMOST_EVENTS read (delivery key, transition seq, the event's attempt token, and the
-- message's stream sequence; the first copy of each event only), the one with the highest
-- stream sequence that the restored ledger proves was on the stream before its backup: the
-- ledger holds the transition as that authorization, of that very attempt, and the next one
-- as the dispatcher's publication of the same attempt (authorized -> published, reason
-- published). The dispatcher sends nothing until JetStream acknowledged the authorized event,
-- and records the publication after the send, so the backup holding the publication proves
-- the event was stored before the backup. That holds of the copy JetStream acknowledged, which
-- the first copy the replay read is only while the stream still holds it (a relay's publish
-- flushed after the duplicate window stores another). An outbox row's absence proves nothing
-- of the kind: a relay of the restored ledger may have published and removed it after the
-- restore. No row when none of them is such a witness.
WITH c AS (
    SELECT unnest(@delivery_keys::BYTEA[]) AS delivery_key,
           unnest(@seqs::BIGINT[]) AS seq,
           unnest(@attempt_tokens::BYTEA[]) AS attempt_token,
           unnest(@stream_seqs::BIGINT[]) AS stream_seq
)
SELECT c.delivery_key::BYTEA AS delivery_key, c.seq::BIGINT AS seq, c.stream_seq::BIGINT AS stream_seq
FROM c
JOIN history a ON a.delivery_key = c.delivery_key AND a.seq = c.seq
JOIN history p ON p.delivery_key = c.delivery_key AND p.seq = c.seq + 1
WHERE a.to_state = 'authorized' AND a.attempt_token = c.attempt_token
  AND p.from_state = 'authorized' AND p.to_state = 'published' AND p.reason = 'published'
  AND p.attempt_token = a.attempt_token
ORDER BY c.stream_seq DESC
LIMIT 1;
