package ledger_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// stream builds an intent's transitions on ATMOST_EVENTS from seq 1: each step is a state, the
// first the creation. Steps after a claim carry the claim's attempt.
func stream(t *testing.T, states ...ledger.State) ([]ledger.StreamTransition, identity.AttemptToken) {
	t.Helper()
	token, err := identity.NewAttemptToken()
	require.NoError(t, err)
	out := make([]ledger.StreamTransition, len(states))
	var from ledger.State
	for i, to := range states {
		tr := ledger.StreamTransition{Seq: int64(i + 1), From: from, To: to}
		if i > 0 {
			tr.Attempt, tr.Epoch, tr.Generation = token, 1, 1000+int64(i)
		}
		out[i] = tr
		from = to
	}
	return out, token
}

func (e *env) restore(key identity.DeliveryKey, acct string, tr []ledger.StreamTransition, env *identity.Envelope, dryRun bool) ledger.RestoreResult {
	e.t.Helper()
	res, err := e.l.Restore(e.ctx, ledger.StreamHistory{Key: key, Account: acct, Transitions: tr, Envelope: env}, "alice", map[string]any{"since": "test"}, dryRun)
	require.NoError(e.t, err)
	return res
}

// ledgerRows is everything of an intent the restore may write: the intent, its history and
// its outbox rows.
func (e *env) ledgerRows(key identity.DeliveryKey) string {
	e.t.Helper()
	var s string
	require.NoError(e.t, e.pool.QueryRow(e.ctx, `SELECT concat_ws(' | ',
		(SELECT to_jsonb(i)::TEXT FROM intents i WHERE delivery_key = $1),
		(SELECT string_agg(to_jsonb(h)::TEXT, ',' ORDER BY seq) FROM history h WHERE delivery_key = $1),
		(SELECT string_agg(to_jsonb(o)::TEXT, ',' ORDER BY seq) FROM outbox o WHERE delivery_key = $1))`, key.Bytes()).Scan(&s))
	return s
}

func TestRestoreMovesAnIntentTheStreamShowsAuthorizedToIndeterminate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.submit("authorized after the backup")
	tr, token := stream(t, ledger.Pending, ledger.Pending, ledger.Authorized)

	res := e.restore(key, account, tr, nil, false)
	require.Equal(t, ledger.RestoreMoved, res.Verdict)
	require.Equal(t, ledger.Indeterminate, res.To)
	require.Equal(t, ledger.ReasonRestoreAhead, res.Reason)
	require.Equal(t, int64(1), res.LedgerSeq)
	require.Equal(t, int64(3), res.StreamSeq)
	require.Equal(t, int64(4), res.NewSeq, "numbered past the stream, so its event id is new")

	in := e.intent(key)
	require.Equal(t, ledger.Indeterminate, in.State)
	require.Equal(t, ledger.ReasonRestoreAhead, in.Reason)
	require.Equal(t, token, in.Token, "the attempt whose outcome is unknown is the stream's")
	require.Equal(t, int64(4), in.Seq)
	require.Equal(t, 1, in.AttemptsAuthorized)
	require.Nil(t, in.LeaseExpiresAt)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND seq = 4 AND from_state = 'pending'
		AND to_state = 'indeterminate' AND actor = 'alice' AND (detail->>'ledger_seq')::INT = 1 AND (detail->>'stream_seq')::INT = 3
		AND detail->>'since' = 'test'`, key.Bytes()))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1 AND seq = 4 AND NOT dispatch`, key.Bytes()))

	// The reconciler can claim its one lookup, though the restored ledger never saw the attempt.
	claim, err := e.l.ClaimReconciliation(e.ctx, key, newClaimToken())
	require.NoError(t, err)
	require.Equal(t, token, claim.Token)
}

func TestRestorePublishesWhatTheStreamShowsPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.claim("published after the backup")
	tr, _ := stream(t, ledger.Pending, ledger.Pending, ledger.Authorized, ledger.Published)

	res := e.restore(c.Key, account, tr, nil, false)
	require.Equal(t, ledger.RestoreMoved, res.Verdict)
	require.Equal(t, ledger.Published, res.To)
	require.Equal(t, ledger.ReasonRestorePublished, res.Reason)
	in := e.intent(c.Key)
	require.Equal(t, ledger.Published, in.State)
	require.Nil(t, in.LeaseExpiresAt, "the restored claim's lease is gone")

	// The worker of the restored claim is refused (its intent is no longer pending).
	_, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.Error(t, err)
}

func TestRestoreDoesNotMoveAnIntentWhoseLedgerIsNotBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("the ledger saw it all") // seq 3: submitted, claimed, authorized
	for _, tr := range [][]ledger.State{
		{ledger.Pending, ledger.Pending, ledger.Authorized}, // the same point
		{ledger.Pending, ledger.Pending},                    // the stream is behind the ledger
	} {
		steps, _ := stream(t, tr...)
		before := e.ledgerRows(c.Key)
		for _, dry := range []bool{true, false} {
			res := e.restore(c.Key, account, steps, nil, dry)
			require.Equal(t, ledger.RestoreNotBehind, res.Verdict)
			require.Empty(t, res.To)
			require.Equal(t, before, e.ledgerRows(c.Key))
		}
	}
	require.Equal(t, ledger.Authorized, e.state(c.Key))
}

func TestRestoreNeverLeavesPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("published before the backup")
	_, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true})
	require.NoError(t, err)
	require.Equal(t, ledger.Published, e.state(c.Key))
	before := e.ledgerRows(c.Key)
	// A stream that claims more (it cannot, but the guard must not care).
	tr, _ := stream(t, ledger.Pending, ledger.Pending, ledger.Authorized, ledger.Published, ledger.Parked)
	res := e.restore(c.Key, account, tr, nil, false)
	require.Equal(t, ledger.RestorePublishedAlready, res.Verdict)
	require.Equal(t, before, e.ledgerRows(c.Key))
}

func TestRestoreResumesPendingOnlyWhenNothingAheadWasAuthorized(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	// Claimed and abandoned after the backup: no byte can have left (the witness rule).
	key := e.submit("claimed, never authorized")
	tr, _ := stream(t, ledger.Pending, ledger.Pending, ledger.Pending)
	res := e.restore(key, account, tr, nil, false)
	require.Equal(t, ledger.Pending, res.To)
	require.Equal(t, ledger.ReasonRestoreResumed, res.Reason)
	require.Equal(t, ledger.Pending, e.state(key))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1 AND seq = 4 AND dispatch`, key.Bytes()),
		"a resumed intent is work again")

	// Authorized after the backup, then failed and retried: the stream's latest is pending, but
	// bytes may have left: a human decides, it is never pending again.
	key = e.submit("authorized, failed, retried")
	tr, _ = stream(t, ledger.Pending, ledger.Pending, ledger.Authorized, ledger.Failed, ledger.Pending)
	res = e.restore(key, account, tr, nil, false)
	require.Equal(t, ledger.Parked, res.To)
	require.Equal(t, ledger.ReasonRestoreParked, res.Reason)

	// A kill switch refused it after the backup (pending -> failed, never authorized): parked.
	key = e.submit("refused by a gate")
	tr, _ = stream(t, ledger.Pending, ledger.Pending, ledger.Failed)
	res = e.restore(key, account, tr, nil, false)
	require.Equal(t, ledger.Parked, res.To)

	// The same for an intent the restored ledger lacks: recreated parked, never pending.
	env := envelope(t, account, "created, authorized, failed, retried after the backup")
	tr, _ = stream(t, ledger.Pending, ledger.Pending, ledger.Authorized, ledger.Failed, ledger.Pending)
	res = e.restore(env.DeliveryKey(), account, tr, &env, false)
	require.Equal(t, ledger.RestoreCreated, res.Verdict)
	require.Equal(t, ledger.Parked, res.To)
	require.Equal(t, ledger.Parked, e.state(env.DeliveryKey()))
}

// Whatever the stream holds ahead of the ledger, an authorization there never leaves the intent
// pending (or failed, from which it would be retried), and a publication there always wins.
func TestRestoreNeverMakesAnIntentTheStreamShowsAuthorizedPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	next := map[ledger.State][]ledger.State{
		ledger.Pending:       {ledger.Pending, ledger.Authorized, ledger.Failed, ledger.Parked},
		ledger.Authorized:    {ledger.Published, ledger.Failed, ledger.Indeterminate},
		ledger.Failed:        {ledger.Pending, ledger.Parked},
		ledger.Indeterminate: {ledger.Published, ledger.Failed, ledger.Parked},
		ledger.Parked:        {ledger.Published, ledger.Failed},
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for i := 0; i < 60; i++ {
		states := []ledger.State{ledger.Pending}
		for n := 1 + rng.IntN(7); len(states) < n; {
			options := next[states[len(states)-1]]
			if len(options) == 0 {
				break
			}
			states = append(states, options[rng.IntN(len(options))])
		}
		if len(states) < 2 {
			states = append(states, ledger.Pending)
		}
		tr, _ := stream(t, states...)
		key := e.submit(fmt.Sprintf("walk %d", i))
		res := e.restore(key, account, tr, nil, false)
		authorized, published := false, false
		for _, s := range states[1:] {
			authorized = authorized || s == ledger.Authorized
			published = published || s == ledger.Published
		}
		latest := states[len(states)-1]
		got := e.state(key)
		switch {
		case published:
			require.Equal(t, ledger.Published, got, "%v", states)
		case authorized && (latest == ledger.Authorized || latest == ledger.Indeterminate):
			require.Equal(t, ledger.Indeterminate, got, "%v", states)
		case authorized:
			require.Equal(t, ledger.Parked, got, "%v: bytes may have left, and the stream went on without the ledger", states)
		case latest == ledger.Pending:
			require.Equal(t, ledger.Pending, got, "%v: nothing ahead was authorized", states)
		default:
			require.Equal(t, ledger.Parked, got, "%v", states)
		}
		require.Equal(t, res.To, got)
		again := e.restore(key, account, tr, nil, false)
		require.Equal(t, ledger.RestoreNotBehind, again.Verdict, "%v: a second restore changes nothing", states)
	}
}

func TestRestoreRecreatesAnIntentTheLedgerLacksFromItsEnvelope(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	// Authorized after the backup, unknown to the restored ledger: indeterminate.
	env := envelope(t, account, "created after the backup")
	tr, token := stream(t, ledger.Pending, ledger.Pending, ledger.Authorized)
	res := e.restore(env.DeliveryKey(), account, tr, &env, false)
	require.Equal(t, ledger.RestoreCreated, res.Verdict)
	require.Equal(t, ledger.Indeterminate, res.To)
	in := e.intent(env.DeliveryKey())
	require.Equal(t, ledger.Indeterminate, in.State)
	require.Equal(t, token, in.Token)
	require.Equal(t, `{"text":"created after the backup"}`, in.Request)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1`, env.DeliveryKey().Bytes()),
		"the earlier transitions are on the stream; the ledger continues from them")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND seq = 4 AND from_state = 'authorized'`, env.DeliveryKey().Bytes()))

	// A producer re-publishing it now is a duplicate: it is never pending again.
	sub, err := e.l.Submit(e.ctx, []identity.Envelope{env})
	require.NoError(t, err)
	require.Equal(t, ledger.Duplicate, sub[0].Outcome)

	// Never authorized: pending again, from its envelope, as work.
	env = envelope(t, account, "submitted after the backup")
	tr, _ = stream(t, ledger.Pending)
	res = e.restore(env.DeliveryKey(), account, tr, &env, false)
	require.Equal(t, ledger.RestoreCreated, res.Verdict)
	require.Equal(t, ledger.Pending, res.To)
	require.Equal(t, int64(2), res.NewSeq)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1 AND dispatch`, env.DeliveryKey().Bytes()))
	require.Equal(t, ledger.RestoreNotBehind, e.restore(env.DeliveryKey(), account, tr, &env, false).Verdict)

	// Without its envelope, or for an account the restored ledger lacks: left for a human.
	env = envelope(t, account, "its envelope aged out")
	res = e.restore(env.DeliveryKey(), account, tr, nil, false)
	require.Equal(t, ledger.RestoreNoEnvelope, res.Verdict)
	require.True(t, res.Verdict.NeedsHuman())
	_, err = e.l.Get(e.ctx, env.DeliveryKey())
	require.ErrorIs(t, err, ledger.ErrNotFound)
	env = envelope(t, "acct-new", "an account added after the backup")
	res = e.restore(env.DeliveryKey(), "acct-new", tr, &env, false)
	require.Equal(t, ledger.RestoreUnknownAccount, res.Verdict)

	// An envelope that is not the intent's is refused.
	other := envelope(t, account, "someone else")
	_, err = e.l.Restore(e.ctx, ledger.StreamHistory{Key: env.DeliveryKey(), Account: account, Transitions: tr, Envelope: &other}, "alice", nil, false)
	require.Error(t, err)
}

func TestRestoreDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.submit("dry")
	tr, _ := stream(t, ledger.Pending, ledger.Pending, ledger.Authorized, ledger.Published)
	before := e.ledgerRows(key)
	res := e.restore(key, account, tr, nil, true)
	require.Equal(t, ledger.RestoreMoved, res.Verdict, "what it would do")
	require.Equal(t, ledger.Published, res.To)
	require.Equal(t, before, e.ledgerRows(key))

	env := envelope(t, account, "dry and missing")
	res = e.restore(env.DeliveryKey(), account, tr, &env, true)
	require.Equal(t, ledger.RestoreCreated, res.Verdict)
	_, err := e.l.Get(e.ctx, env.DeliveryKey())
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

func TestRestoreRefusesMalformedHistories(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.submit("malformed")
	for name, tr := range map[string][]ledger.StreamTransition{
		"none":               nil,
		"unknown state":      {{Seq: 1, To: "in_flight"}},
		"creation not first": {{Seq: 2, To: ledger.Pending}},
		"seq 0":              {{Seq: 0, To: ledger.Pending}},
	} {
		_, err := e.l.Restore(e.ctx, ledger.StreamHistory{Key: key, Account: account, Transitions: tr}, "alice", nil, false)
		require.Error(t, err, name)
	}
	tr, _ := stream(t, ledger.Pending, ledger.Pending)
	_, err := e.l.Restore(e.ctx, ledger.StreamHistory{Key: key, Account: account, Transitions: tr}, " ", nil, false)
	require.Error(t, err, "an operator must be named")
	require.Equal(t, ledger.Pending, e.state(key))
}

// The duplicate-text claim an authorization took after the backup is not in the restored
// ledger: the restore re-takes it for every intent it does not resume as pending, so another
// intent with the same text is not authorized inside the window.
func TestRestoreRetakesTheDuplicateTextClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("text_window_seconds", 3600)
	claims := func(key identity.DeliveryKey) int {
		return e.count(`SELECT count(*) FROM text_claims WHERE account_id = $1 AND delivery_key = $2 AND last_at >= now() - INTERVAL '1 minute'`,
			account, key.Bytes())
	}
	for _, tc := range []struct {
		name   string
		states []ledger.State
		to     ledger.State
	}{
		{"indeterminate", []ledger.State{ledger.Pending, ledger.Pending, ledger.Authorized}, ledger.Indeterminate},
		{"published", []ledger.State{ledger.Pending, ledger.Pending, ledger.Authorized, ledger.Published}, ledger.Published},
		{"parked", []ledger.State{ledger.Pending, ledger.Pending, ledger.Authorized, ledger.Failed}, ledger.Parked},
	} {
		text := "said once after the backup: " + tc.name
		key := e.submit(text)
		tr, _ := stream(t, tc.states...)
		require.Zero(t, claims(key))
		res := e.restore(key, account, tr, nil, false)
		require.Equal(t, tc.to, res.To, tc.name)
		require.Equal(t, 1, claims(key), "%s: the claim its authorization took is taken again", tc.name)

		// Another intent with the same text, inside the window: a duplicate.
		other := envelopeWithOccurrence(t, account, text, "again")
		sub, err := e.l.Submit(e.ctx, []identity.Envelope{other})
		require.NoError(t, err)
		c, err := e.l.Begin(e.ctx, sub[0].Key, requestHash(text+" again"), lease)
		require.NoError(t, err)
		a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		require.Equal(t, ledger.Parked, a.State, "%s", tc.name)
		require.Equal(t, ledger.ReasonDuplicateText, a.Reason, "%s", tc.name)
	}

	// An intent the restore makes pending again took no claim: nothing of it can have left.
	key := e.submit("resumed, never authorized")
	tr, _ := stream(t, ledger.Pending, ledger.Pending)
	require.Equal(t, ledger.Pending, e.restore(key, account, tr, nil, false).To)
	require.Zero(t, claims(key))

	// A recreated intent takes its claim too, and a dry run takes none.
	env := envelope(t, account, "recreated and claimed")
	tr, _ = stream(t, ledger.Pending, ledger.Pending, ledger.Authorized)
	require.Equal(t, ledger.RestoreCreated, e.restore(env.DeliveryKey(), account, tr, &env, true).Verdict)
	require.Zero(t, claims(env.DeliveryKey()))
	require.Equal(t, ledger.RestoreCreated, e.restore(env.DeliveryKey(), account, tr, &env, false).Verdict)
	require.Equal(t, 1, claims(env.DeliveryKey()))
	in := e.intent(env.DeliveryKey())
	require.Empty(t, in.ObjectID, "ATMOST_EVENTS carries no object ids: a restored intent has none")
}

// A key the restore cannot recreate (its envelope aged out, or its account is not in the
// restored ledger) is blocked: a producer publishing it again gets a duplicate, never a pending
// intent for what may already have been sent.
func TestRestoreBlocksAKeyItCannotRecreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tr, _ := stream(t, ledger.Pending, ledger.Pending, ledger.Authorized, ledger.Published)

	env := envelope(t, account, "its envelope aged out, it was published")
	dry := e.restore(env.DeliveryKey(), account, tr, nil, true)
	require.Equal(t, ledger.RestoreNoEnvelope, dry.Verdict)
	require.Zero(t, e.count(`SELECT count(*) FROM restore_blocks`), "a dry run blocks nothing")
	res := e.restore(env.DeliveryKey(), account, tr, nil, false)
	require.Equal(t, ledger.RestoreNoEnvelope, res.Verdict)
	require.True(t, res.Blocked)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM restore_blocks WHERE delivery_key = $1 AND reason = 'no_envelope'
		AND actor = 'alice' AND stream_seq = 4 AND stream_state = 'published'`, env.DeliveryKey().Bytes()))
	sub, err := e.l.Submit(e.ctx, []identity.Envelope{env, envelope(t, account, "something new")})
	require.NoError(t, err)
	require.Equal(t, ledger.Duplicate, sub[0].Outcome, "a blocked key is never created again")
	require.Equal(t, ledger.Created, sub[1].Outcome)
	_, err = e.l.Get(e.ctx, env.DeliveryKey())
	require.ErrorIs(t, err, ledger.ErrNotFound)
	require.Equal(t, ledger.RestoreNoEnvelope, e.restore(env.DeliveryKey(), account, tr, nil, false).Verdict, "a second run changes nothing")

	// The account is not in the restored ledger: blocked too; once a human adds the account,
	// a producer's re-publication is still a duplicate, and a restore run with the envelope
	// recreates the intent.
	lost := envelope(t, "acct-later", "an account added after the backup")
	res = e.restore(lost.DeliveryKey(), "acct-later", tr, &lost, false)
	require.Equal(t, ledger.RestoreUnknownAccount, res.Verdict)
	require.True(t, res.Blocked)
	require.NoError(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "acct-later", Platform: "sim", Settings: []byte(`{"url":"http://127.0.0.1:1"}`)}, ledger.Actor{Name: "test", Reason: "a test account"}))
	sub, err = e.l.Submit(e.ctx, []identity.Envelope{lost})
	require.NoError(t, err)
	require.Equal(t, ledger.Duplicate, sub[0].Outcome)
	res = e.restore(lost.DeliveryKey(), "acct-later", tr, &lost, false)
	require.Equal(t, ledger.RestoreCreated, res.Verdict)
	require.Equal(t, ledger.Published, e.state(lost.DeliveryKey()))
}

// Restore reads the restored ledger's backup point and epochs for the command's checks.
func TestRestorePointNamesTheNewestHistoryAndTheEpochs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pt, err := e.l.RestorePoint(e.ctx)
	require.NoError(t, err)
	require.True(t, pt.NewestHistoryAt.IsZero(), "no history yet")
	require.True(t, pt.OtherEpochsAt.IsZero(), "one epoch only")
	require.Equal(t, int64(1), pt.Epoch.Epoch)

	c := e.claim("worked in epoch 1")
	pt, err = e.l.RestorePoint(e.ctx)
	require.NoError(t, err)
	require.False(t, pt.NewestHistoryAt.IsZero())
	require.Equal(t, int64(1), pt.CurrentEpochHistory, "the claim's history row carries epoch 1")

	first := pt.Epoch.At
	_, err = e.l.BumpEpoch(e.ctx, ledger.Actor{Name: "alice", Reason: "restored"})
	require.NoError(t, err)
	pt, err = e.l.RestorePoint(e.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), pt.Epoch.Epoch)
	require.Equal(t, first, pt.OtherEpochsAt)
	require.True(t, pt.Epoch.At.After(pt.NewestHistoryAt))
	require.Zero(t, pt.CurrentEpochHistory)

	// A restore's own rows do not count as the ledger's point.
	before := pt.NewestHistoryAt
	tr, _ := stream(t, ledger.Pending, ledger.Pending, ledger.Authorized)
	require.Equal(t, ledger.Indeterminate, e.restore(c.Key, account, tr, nil, false).To)
	pt, err = e.l.RestorePoint(e.ctx)
	require.NoError(t, err)
	require.Equal(t, before, pt.NewestHistoryAt)
}

// A completion commits while Restore waits for the intent's row: Restore must decide on the
// row as the completion left it (published: never left), not on what it read before. At READ
// COMMITTED that is the row its verdict locked FOR UPDATE, or, had it not locked it, the guard
// its UPDATE restates on the newest row version; at SERIALIZABLE the restart.
func TestRestoreThatWaitedOnACompletionLeavesItPublished(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.authorized("published while the restore waited")
		tr, _ := stream(t, ledger.Pending, ledger.Pending, ledger.Authorized, ledger.Indeterminate)
		var res ledger.RestoreResult
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			_, err := l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true})
			return err
		}, func() (err error) {
			res, err = e.l.Restore(e.ctx, ledger.StreamHistory{Key: c.Key, Account: account, Transitions: tr}, "alice", nil, false)
			return err
		})
		require.NoError(t, firstErr)
		if secondErr != nil {
			requireRefused(t, secondErr, ledger.ErrInvalidTransition)
		} else {
			require.False(t, res.Changes(), "verdict %s", res.Verdict)
		}
		in := e.intent(c.Key)
		require.Equal(t, ledger.Published, in.State)
		require.Equal(t, int64(4), in.Seq)
		require.Equal(t, "obj-1", in.ObjectID)
		require.Zero(t, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND actor = 'alice'`, c.Key.Bytes()))
	})
}

// A witness that a replay reaches back before the backup is an authorization the restored
// ledger holds published by the dispatcher: it sent only after JetStream acknowledged the
// authorized event. An authorization without its publication in the ledger, or completed as
// not sent (the dispatcher gives up on an authorized event JetStream did not acknowledge),
// proves nothing about when its event reached the stream; nor does any other transition, nor
// an event numbered as the authorization but of another attempt.
func TestRestoreWitnessIsAnAuthorizationTheLedgerHoldsPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	complete := func(c ledger.Claim, o ledger.Outcome) {
		t.Helper()
		_, err := e.l.Complete(e.ctx, c, o)
		require.NoError(t, err)
	}
	published := e.authorized("published")
	complete(published, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true})
	alsoPublished := e.authorized("also published")
	complete(alsoPublished, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-2", Confirmed: true})
	inFlightOnly := e.authorized("authorized, never completed")
	notSent := e.authorized("authorized, the witness failed")
	complete(notSent, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	unknown := e.authorized("authorized, outcome unknown")
	complete(unknown, ledger.Outcome{Result: ledger.Unknown})

	// Transition 3 of each is its authorization, 4 its completion.
	at := func(c ledger.Claim, seq int64, streamSeq uint64) ledger.StreamPosition {
		return ledger.StreamPosition{Key: c.Key, Seq: seq, Attempt: c.Token, StreamSeq: streamSeq}
	}
	otherAttempt := at(published, 3, 16)
	otherAttempt.Attempt = inFlightOnly.Token
	witness := func(positions ...ledger.StreamPosition) (ledger.StreamPosition, bool) {
		t.Helper()
		w, ok, err := e.l.RestoreWitness(e.ctx, positions)
		require.NoError(t, err)
		return w, ok
	}
	for name, p := range map[string]ledger.StreamPosition{
		"an authorization never completed":     at(inFlightOnly, 3, 10),
		"an authorization completed not sent":  at(notSent, 3, 11),
		"an authorization completed unknown":   at(unknown, 3, 12),
		"a claim of a published intent":        at(published, 2, 13),
		"the publication itself":               at(published, 4, 14),
		"a transition the ledger lacks":        at(published, 7, 15),
		"the authorization of another attempt": otherAttempt,
	} {
		_, ok := witness(p)
		require.False(t, ok, "%s is no witness", name)
	}
	_, ok := witness()
	require.False(t, ok)

	w, ok := witness(at(inFlightOnly, 3, 30), at(published, 3, 20), at(notSent, 3, 40))
	require.True(t, ok)
	require.Equal(t, at(published, 3, 20), w)
	w, ok = witness(at(published, 3, 20), at(alsoPublished, 3, 25), at(unknown, 3, 50))
	require.True(t, ok)
	require.Equal(t, at(alsoPublished, 3, 25), w, "the witness with the highest stream sequence")

	// Past the first statement's batch: more positions than one statement looks at, the
	// witness the lowest of them.
	many := []ledger.StreamPosition{at(published, 3, 1)}
	for i := range 2500 {
		many = append(many, at(inFlightOnly, 3, uint64(100+i)))
	}
	w, ok = witness(many...)
	require.True(t, ok)
	require.Equal(t, at(published, 3, 1), w)
}

// The witness a restored ledger records is, of its attempts published by the dispatcher, the
// one whose evidence names the highest stream sequence JetStream acknowledged its authorized
// event at. A sequence recorded with any other outcome, or by a completion fenced out, names
// no message stored before a send the ledger holds published.
func TestRecordedWitnessIsTheNewestAcknowledgedAuthorizationTheLedgerHoldsPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	complete := func(c ledger.Claim, o ledger.Outcome, fenced bool) {
		t.Helper()
		_, err := e.l.Complete(e.ctx, c, o)
		if fenced {
			require.ErrorIs(t, err, ledger.ErrFenced)
			return
		}
		require.NoError(t, err)
	}
	recorded := func() (ledger.StreamPosition, bool) {
		t.Helper()
		w, ok, err := e.l.RecordedWitness(e.ctx)
		require.NoError(t, err)
		return w, ok
	}
	_, ok := recorded()
	require.False(t, ok, "an empty ledger records no witness")
	before := e.authorized("published, without a witness sequence (written before it was recorded)")
	complete(before, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-0", Confirmed: true}, false)
	_, ok = recorded()
	require.False(t, ok)

	published := e.authorized("published")
	complete(published, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true, WitnessSeq: 20}, false)
	newest := e.authorized("published, acknowledged later")
	complete(newest, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-2", Confirmed: true, WitnessSeq: 30}, false)
	notSent := e.authorized("not sent after its witness")
	complete(notSent, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed, WitnessSeq: 40}, false)
	unknown := e.authorized("outcome unknown")
	complete(unknown, ledger.Outcome{Result: ledger.Unknown, WitnessSeq: 50}, false)
	readBack := e.authorized("read back, not confirmed")
	complete(readBack, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-3", WitnessSeq: 55}, false)
	// The same attempt reported again otherwise (its read-back unconfirmed): fenced out,
	// evidence only. (The very same report again would answer as it landed, and write nothing.)
	complete(published, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", WitnessSeq: 60}, true)

	w, ok := recorded()
	require.True(t, ok)
	require.Equal(t, ledger.StreamPosition{Key: newest.Key, Seq: 3, Attempt: newest.Token, StreamSeq: 30}, w,
		"the published attempt with the highest witness sequence, and its authorization")
}
