package ledger_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger"
)

var producer = ledger.Actor{Name: "producer", Reason: "changed my mind"}

// A cancel parks an intent that is not yet authorized (pending free or claimed, or failed),
// and no attempt is ever authorized on it afterwards; a second cancel answers cancelled again
// and writes nothing.
func TestCancelParksAnIntentNotYetAuthorized(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	free := e.submit("cancel free")
	c, err := e.l.Cancel(e.ctx, account, free, producer)
	require.NoError(t, err)
	require.Equal(t, ledger.Cancellation{Cancelled: true, Changed: true, Prior: ledger.Pending, State: ledger.Parked, Reason: ledger.ReasonCancelled, Seq: 2}, c)
	_, err = e.l.Begin(e.ctx, free, requestHash("cancel free"), lease)
	requireRefused(t, err, ledger.ErrInvalidTransition)
	require.Equal(t, 0, e.attempts(free))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND reason = 'cancelled' AND actor = 'producer' AND detail->>'note' = 'changed my mind'`, free.Bytes()))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1 AND seq = 2`, free.Bytes()), "its event is on its way")

	again, err := e.l.Cancel(e.ctx, account, free, producer)
	require.NoError(t, err)
	require.True(t, again.Cancelled)
	require.False(t, again.Changed)
	require.Equal(t, int64(2), e.intent(free).Seq)

	claimed := e.claim("cancel claimed")
	c, err = e.l.Cancel(e.ctx, account, claimed.Key, producer)
	require.NoError(t, err)
	require.True(t, c.Changed)
	_, err = e.l.Authorize(e.ctx, claimed, inFlight, contract)
	requireRefused(t, err, ledger.ErrInvalidTransition)
	require.Equal(t, 0, e.intent(claimed.Key).AttemptsAuthorized)

	failed := e.authorized("cancel failed")
	_, err = e.l.Complete(e.ctx, failed, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	c, err = e.l.Cancel(e.ctx, account, failed.Key, producer)
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, c.Prior)
	require.True(t, c.Changed)
	requireRefused(t, e.l.Retry(e.ctx, failed.Key), ledger.ErrInvalidTransition)
}

// From authorization on it is too late: the answer names the state, and nothing changes.
func TestCancelIsTooLateOnceAuthorized(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, tc := range []struct {
		name    string
		outcome *ledger.Outcome
		want    ledger.State
	}{
		{"authorized", nil, ledger.Authorized},
		{"published", &ledger.Outcome{Result: ledger.Sent, ObjectID: "obj", Confirmed: true}, ledger.Published},
		{"indeterminate", &ledger.Outcome{Result: ledger.Unknown}, ledger.Indeterminate},
	} {
		c := e.authorized("too late " + tc.name)
		if tc.outcome != nil {
			_, err := e.l.Complete(e.ctx, c, *tc.outcome)
			require.NoError(t, err)
		}
		seq := e.intent(c.Key).Seq
		got, err := e.l.Cancel(e.ctx, account, c.Key, producer)
		require.NoError(t, err)
		require.False(t, got.Cancelled, tc.name)
		require.False(t, got.Changed, tc.name)
		require.Equal(t, tc.want, got.State, tc.name)
		require.Equal(t, seq, e.intent(c.Key).Seq, "%s: nothing written", tc.name)
	}
	parked := e.submit("operator parked first")
	require.NoError(t, e.l.Park(e.ctx, parked, ledger.Actor{Name: "operator", Reason: "stop"}))
	got, err := e.l.Cancel(e.ctx, account, parked, producer)
	require.NoError(t, err)
	require.False(t, got.Cancelled)
	require.Equal(t, ledger.ReasonOperatorParked, got.Reason)
}

// A producer cancels only its own account's intents: another account's is not found, exactly
// as a key that does not exist.
func TestCancelIsScopedToTheAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-2', 'sim')`)
	key := e.submit("not yours")
	_, err := e.l.Cancel(e.ctx, "acct-2", key, producer)
	requireRefused(t, err, ledger.ErrNotFound)
	require.Equal(t, ledger.Pending, e.state(key))
}

// A cancel racing the dispatcher's Begin and Authorize: exactly one of them wins, at both
// isolation levels, over many races. Either the intent is parked cancelled and no attempt was
// ever authorized (zero sends), or it was authorized (one send) and the cancel answered too
// late with the state it found.
func TestCancelRacingTheDispatcherHasExactlyOneWinner(t *testing.T) {
	t.Parallel()
	races := 1000
	if testing.Short() {
		races = 100
	}
	forEachIsolation(t, func(t *testing.T, e *env) {
		dispatcher := e.ledgerWith(ledger.Config{Actor: "dispatcher"})
		cancelled, tooLate := 0, 0
		for i := range races {
			text := fmt.Sprintf("race %d", i)
			key := e.submit(text)
			var wg sync.WaitGroup
			start := make(chan struct{})
			var authorized bool
			var dispatchErr error
			var got ledger.Cancellation
			var cancelErr error
			wg.Go(func() {
				<-start
				c, err := dispatcher.Begin(e.ctx, key, requestHash(text), lease)
				if err != nil {
					dispatchErr = err
					return
				}
				a, err := dispatcher.Authorize(e.ctx, c, inFlight, contract)
				authorized, dispatchErr = err == nil && a.Authorized(), err
			})
			wg.Go(func() {
				<-start
				got, cancelErr = e.l.Cancel(e.ctx, account, key, producer)
			})
			close(start)
			wg.Wait()
			require.NoError(t, cancelErr, "race %d", i)
			in := e.intent(key)
			if got.Cancelled {
				cancelled++
				require.False(t, authorized, "race %d: cancelled, yet authorized", i)
				if dispatchErr != nil {
					requireRefused(t, dispatchErr, ledger.ErrInvalidTransition)
				}
				require.Equal(t, ledger.Parked, in.State)
				require.Equal(t, ledger.ReasonCancelled, in.Reason)
				require.Equal(t, 0, in.AttemptsAuthorized, "race %d: zero sends", i)
			} else {
				tooLate++
				require.NoError(t, dispatchErr, "race %d", i)
				require.True(t, authorized, "race %d: too late, yet not authorized", i)
				require.Equal(t, ledger.Authorized, got.State)
				require.Equal(t, ledger.Authorized, in.State)
				require.Equal(t, 1, in.AttemptsAuthorized, "race %d: one send", i)
			}
		}
		t.Logf("%s: %d races, %d cancelled, %d too late", e.iso, races, cancelled, tooLate)
		require.Equal(t, races, cancelled+tooLate)
	})
}
