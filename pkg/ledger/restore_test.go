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
	claim, err := e.l.ClaimReconciliation(e.ctx, key)
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
