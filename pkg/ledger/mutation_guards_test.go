package ledger_test

// Tests that make mutate (scripts/mutations.txt) names for guards no other test noticed the
// removal of. The first half interleaves two operations on one row deterministically; the
// second half pins single guards that sequential tests elsewhere leave untouched.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// interleave runs first on a ledger of its own up to the moment its holdAt-th transaction would
// commit (ExpireLeases commits twice), with that transaction's row locks held. Then it starts
// second, waits until second is waiting for one of those locks, and only then lets first
// commit. second's statement took its snapshot before first's change was visible, so it must
// decide on the row as first left it: at READ COMMITTED, that is the row it locked FOR UPDATE
// or the WHERE of its UPDATE, re-evaluated on the newest row version; at SERIALIZABLE, the
// restart after the serialization failure. Either way the guard must hold.
func (e *env) interleave(holdAt int, first func(l *ledger.Ledger) error, second func() error) (firstErr, secondErr error) {
	e.t.Helper()
	l := e.ledgerWith(ledger.Config{Actor: "first"})
	reached, release := make(chan struct{}), make(chan struct{})
	var (
		mu      sync.Mutex
		commits int
	)
	ledger.SetCommit(l, func(ctx context.Context, tx pgx.Tx) error {
		mu.Lock()
		commits++
		hold := commits == holdAt
		mu.Unlock()
		if hold {
			close(reached)
			<-release
		}
		return tx.Commit(ctx)
	})
	var releaseOnce sync.Once
	let := func() { releaseOnce.Do(func() { close(release) }) }
	e.t.Cleanup(let) // never leave first hanging, whatever happens below

	firstDone := make(chan error, 1)
	go func() { firstDone <- first(l) }()
	select {
	case <-reached:
	case err := <-firstDone:
		e.t.Fatalf("the first operation ended (%v) before its commit %d", err, holdAt)
	case <-time.After(30 * time.Second):
		e.t.Fatal("the first operation never reached its commit")
	}
	secondDone := make(chan error, 1)
	go func() { secondDone <- second() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		require.NoError(e.t, e.pool.QueryRow(e.ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		if waiting > 0 {
			break
		}
		select {
		case err := <-secondDone:
			e.t.Fatalf("the second operation ended (%v) without waiting for the first one's lock: nothing was interleaved", err)
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the second operation never waited for the first one's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	let()
	return <-firstDone, <-secondDone
}

func requireAnyRefusal(t testing.TB, err error) {
	t.Helper()
	var r *ledger.RefusedError
	require.ErrorAs(t, err, &r, "want a refusal, got %v", err)
}

// at returns a ledger whose Authorize reads the time from now, and moves the claim's lease to
// a minute after now so that the claim is live on that clock.
func (e *env) at(c ledger.Claim, now time.Time) *ledger.Ledger {
	e.t.Helper()
	l := e.ledgerWith(ledger.Config{Actor: "worker at " + now.String()})
	ledger.SetClock(l, func() *time.Time { return &now })
	e.exec(`UPDATE intents SET lease_expires_at = $2 WHERE delivery_key = $1`, c.Key.Bytes(), now.Add(time.Minute))
	return l
}

func (e *env) dbNow() time.Time {
	e.t.Helper()
	var now time.Time
	require.NoError(e.t, e.pool.QueryRow(e.ctx, `SELECT now()`).Scan(&now))
	return now
}

func (e *env) authorizedHistory(key identity.DeliveryKey) int {
	return e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND to_state = 'authorized'`, key.Bytes())
}

// ------------------------------------------------------------ one row, two operations

// Two workers Begin the same intent; the second's statement starts before the first commits
// and waits for its lock. It must see the first claim and open no second attempt.
func TestBeginThatWaitedOnAnotherBeginSeesItsClaim(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		key := e.submit("two workers, one intent")
		var won ledger.Claim
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) (err error) {
			won, err = l.Begin(e.ctx, key, requestHash("x"), lease)
			return err
		}, func() error {
			_, err := e.l.Begin(e.ctx, key, requestHash("x"), lease)
			return err
		})
		require.NoError(t, firstErr)
		requireRefused(t, secondErr, ledger.ErrClaimed)
		require.Equal(t, 1, e.attempts(key), "one claim, one attempt")
		require.Equal(t, won.Token, e.intent(key).Token)
	})
}

// An operator parks a pending intent while a worker's Begin waits for the row: the worker
// must not claim a parked intent.
func TestBeginThatWaitedOnAParkIsRefused(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		key := e.submit("parked under a worker")
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			return l.Park(e.ctx, key, ledger.Actor{Name: "operator", Reason: "stop"})
		}, func() error {
			_, err := e.l.Begin(e.ctx, key, requestHash("x"), lease)
			return err
		})
		require.NoError(t, firstErr)
		requireAnyRefusal(t, secondErr)
		require.Equal(t, ledger.Parked, e.state(key))
		require.Zero(t, e.attempts(key))
	})
}

// A worker's Authorize is retried while the first call is still committing: the attempt is
// authorized once, counted once, and written to history once.
func TestAuthorizeThatWaitedOnTheSameAuthorizeIsRefused(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.claim("authorized twice?")
		var first ledger.Authorization
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) (err error) {
			first, err = l.Authorize(e.ctx, c, inFlight, contract)
			return err
		}, func() error {
			_, err := e.l.Authorize(e.ctx, c, inFlight, contract)
			return err
		})
		require.NoError(t, firstErr)
		require.True(t, first.Authorized(), "reason %s", first.Reason)
		requireRefused(t, secondErr, ledger.ErrInvalidTransition)
		in := e.intent(c.Key)
		require.Equal(t, ledger.Authorized, in.State)
		require.Equal(t, 1, in.AttemptsAuthorized, "one authorization counts once")
		require.Equal(t, 1, e.authorizedHistory(c.Key))
	})
}

// The sweeper abandons a claim whose lease ran out while the claim's Authorize, which started
// just before the deadline (its clock says so), waits for the row: nothing may be authorized on
// an abandoned claim.
func TestAuthorizeThatWaitedOnTheSweeperIsRefused(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.claim("abandoned under the worker")
		e.expireLease(c.Key)
		deadline := *e.intent(c.Key).LeaseExpiresAt
		worker := e.ledgerWith(ledger.Config{Actor: "slow worker"})
		before := deadline.Add(-time.Second)
		ledger.SetClock(worker, func() *time.Time { return &before })

		var swept ledger.Expired
		firstErr, secondErr := e.interleave(2, func(l *ledger.Ledger) (err error) {
			swept, err = l.ExpireLeases(e.ctx, 10)
			return err
		}, func() error {
			_, err := worker.Authorize(e.ctx, c, inFlight, contract)
			return err
		})
		require.NoError(t, firstErr)
		require.Equal(t, ledger.Expired{Abandoned: 1, Changed: []identity.DeliveryKey{c.Key}}, swept)
		requireRefused(t, secondErr, ledger.ErrLeaseLost)
		in := e.intent(c.Key)
		require.Equal(t, ledger.Pending, in.State)
		require.Nil(t, in.LeaseExpiresAt)
		require.Zero(t, in.AttemptsAuthorized)
		require.Zero(t, e.authorizedHistory(c.Key))
	})
}

// Worker A's claim expired and worker B claimed the intent anew while A's Authorize (started
// before A's deadline, on its clock) waited for the row: A must not be authorized on B's
// claim.
func TestAuthorizeThatWaitedOnANewerClaimIsRefused(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		a := e.claim("claimed again under the worker")
		e.expireLease(a.Key)
		deadline := *e.intent(a.Key).LeaseExpiresAt
		workerA := e.ledgerWith(ledger.Config{Actor: "worker-a"})
		before := deadline.Add(-time.Second)
		ledger.SetClock(workerA, func() *time.Time { return &before })

		var b ledger.Claim
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) (err error) {
			b, err = l.Begin(e.ctx, a.Key, requestHash("claimed again under the worker"), lease)
			return err
		}, func() error {
			_, err := workerA.Authorize(e.ctx, a, inFlight, contract)
			return err
		})
		require.NoError(t, firstErr)
		requireAnyRefusal(t, secondErr)
		in := e.intent(a.Key)
		require.Equal(t, ledger.Pending, in.State)
		require.Equal(t, b.Token, in.Token, "B's claim stands")
		require.Zero(t, in.AttemptsAuthorized)
		require.Zero(t, e.authorizedHistory(a.Key))
	})
}

// An operator parks a failed intent while a Retry waits for the row: the intent stays parked.
func TestRetryThatWaitedOnAParkIsRefused(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.authorized("failed, then parked")
		_, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
		require.NoError(t, err)
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			return l.Park(e.ctx, c.Key, ledger.Actor{Name: "operator", Reason: "stop"})
		}, func() error {
			return e.l.Retry(e.ctx, c.Key)
		})
		require.NoError(t, firstErr)
		requireAnyRefusal(t, secondErr)
		require.Equal(t, ledger.Parked, e.state(c.Key))
	})
}

// An authorized intent's lease ran out, but its outcome arrives (and publishes) while an
// operator's Park waits for the row: nothing leaves published.
func TestParkThatWaitedOnAPublishIsRefused(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.authorized("published under the operator")
		e.expireLease(c.Key)
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			_, err := l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj", Confirmed: true})
			return err
		}, func() error {
			return e.l.Park(e.ctx, c.Key, ledger.Actor{Name: "operator", Reason: "stop"})
		})
		require.NoError(t, firstErr)
		requireAnyRefusal(t, secondErr)
		require.Equal(t, ledger.Published, e.state(c.Key))
	})
}

// A claimed intent is authorized while an operator's Park waits for the row: an authorized
// intent whose lease is live is never parked.
func TestParkThatWaitedOnAnAuthorizationIsRefused(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.claim("authorized under the operator")
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			a, err := l.Authorize(e.ctx, c, inFlight, contract)
			if err == nil && !a.Authorized() {
				t.Errorf("not authorized: %s", a.Reason)
			}
			return err
		}, func() error {
			return e.l.Park(e.ctx, c.Key, ledger.Actor{Name: "operator", Reason: "stop"})
		})
		require.NoError(t, firstErr)
		requireAnyRefusal(t, secondErr)
		require.Equal(t, ledger.Authorized, e.state(c.Key))
	})
}

// An operator parks an indeterminate intent while the claimed lookup's resolution waits for the
// row: the human owns it now.
func TestResolveThatWaitedOnAParkIsRefused(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.indeterminate("parked under the reconciler")
		r, err := e.l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
		require.NoError(t, err)
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			return l.Park(e.ctx, c.Key, ledger.Actor{Name: "operator", Reason: "mine now"})
		}, func() error {
			_, err := e.l.ResolveReconciliation(e.ctx, r, ledger.Found, "obj", nil)
			return err
		})
		require.NoError(t, firstErr)
		requireAnyRefusal(t, secondErr)
		require.Equal(t, ledger.Parked, e.state(c.Key))
	})
}

// The sweeper read an expired claim as a candidate, but a worker claimed the intent anew
// before the sweeper's UPDATE reached the row: the new, live claim is left alone.
func TestSweeperThatWaitedOnANewClaimSparesIt(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		stale := e.claim("renewed under the sweeper")
		e.expireLease(stale.Key)
		var fresh ledger.Claim
		var swept ledger.Expired
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) (err error) {
			fresh, err = l.Begin(e.ctx, stale.Key, requestHash("renewed under the sweeper"), lease)
			return err
		}, func() (err error) {
			swept, err = e.l.ExpireLeases(e.ctx, 10)
			return err
		})
		require.NoError(t, firstErr)
		require.NoError(t, secondErr)
		require.Zero(t, swept, "a live lease is not expired")
		in := e.intent(stale.Key)
		require.Equal(t, ledger.Pending, in.State)
		require.Equal(t, fresh.Token, in.Token)
		require.NotNil(t, in.LeaseExpiresAt, "the new claim keeps its lease")
		require.Zero(t, e.count(`SELECT count(*) FROM attempt_evidence WHERE attempt_token = $1`, fresh.Token.Bytes()))
	})
}

// --------------------------------------------------------------------- single guards

// requireCompleteFenced completes forged, a claim that differs from the authorized c in one
// part of its fence, and checks it changed nothing but was kept as fenced evidence.
func (e *env) requireCompleteFenced(c, forged ledger.Claim) {
	e.t.Helper()
	_, err := e.l.Complete(e.ctx, forged, ledger.Outcome{Result: ledger.Sent, ObjectID: "forged", Confirmed: true})
	requireRefused(e.t, err, ledger.ErrFenced)
	in := e.intent(c.Key)
	require.Equal(e.t, ledger.Authorized, in.State, "the authorized attempt still decides")
	require.Empty(e.t, in.ObjectID)
	require.Equal(e.t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE delivery_key = $1 AND fenced AND object_id = 'forged'`, c.Key.Bytes()))
	done, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "real", Confirmed: true})
	require.NoError(e.t, err)
	require.Equal(e.t, ledger.Published, done.State)
}

func TestCompleteWithAnotherAttemptsTokenIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("token fence")
	forged := c
	var err error
	forged.Token, err = identity.NewAttemptToken()
	require.NoError(t, err)
	e.requireCompleteFenced(c, forged)
}

func TestCompleteFromAnotherEpochIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("epoch fence")
	forged := c
	forged.Epoch++
	e.requireCompleteFenced(c, forged)
}

func TestCompleteFromAnotherGenerationIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("generation fence")
	forged := c
	forged.Generation++
	e.requireCompleteFenced(c, forged)
}

func TestAuthorizeFromAnotherEpochIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.claim("epoch fence at authorize")
	forged := c
	forged.Epoch++
	_, err := e.l.Authorize(e.ctx, forged, inFlight, contract)
	requireRefused(t, err, ledger.ErrFenced)
	require.Equal(t, ledger.Pending, e.state(c.Key))
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized())
}

// A pre-authorization lease is dead at exactly its deadline, and live a microsecond before.
func TestAuthorizeAtExactlyTheLeaseDeadlineIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.claim("on the deadline")
	worker := e.ledgerWith(ledger.Config{Actor: "punctual worker"})
	now := c.LeaseExpiresAt
	ledger.SetClock(worker, func() *time.Time { return &now })
	_, err := worker.Authorize(e.ctx, c, inFlight, contract)
	requireRefused(t, err, ledger.ErrLeaseLost)
	require.Equal(t, ledger.Pending, e.state(c.Key))

	now = c.LeaseExpiresAt.Add(-time.Microsecond)
	a, err := worker.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "reason %s", a.Reason)
}

// Every way out of authorized that does not prove nothing was sent keeps the duplicate-text
// claim: a completion that published or is unknown, a reconciliation that found the object or
// found nothing, an operator who says it was published.
func TestOnlyAProvenNotSentReleasesTheText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	claimed := func(key identity.DeliveryKey) int {
		return e.count(`SELECT count(*) FROM text_claims WHERE delivery_key = $1`, key.Bytes())
	}

	published := e.authorized("published text")
	_, err := e.l.Complete(e.ctx, published, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true})
	require.NoError(t, err)
	require.Equal(t, 1, claimed(published.Key), "published keeps the text")

	unknown := e.indeterminate("unknown text")
	require.Equal(t, 1, claimed(unknown.Key), "indeterminate keeps the text")

	for result, want := range map[ledger.LookupResult]ledger.State{ledger.Found: ledger.Published, ledger.NotFound: ledger.Parked} {
		c := e.indeterminate("reconciled text " + string(result))
		r, err := e.l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
		require.NoError(t, err)
		got, err := e.l.ResolveReconciliation(e.ctx, r, result, "obj-"+string(result), nil)
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, 1, claimed(c.Key), "a lookup that says %s keeps the text", result)
	}

	operator := e.authorized("text an operator saw published")
	e.expireLease(operator.Key)
	require.NoError(t, e.l.Park(e.ctx, operator.Key, ledger.Actor{Name: "alice", Reason: "checking"}))
	require.NoError(t, e.l.Resolve(e.ctx, operator.Key, ledger.Published, "obj-9", ledger.Actor{Name: "alice", Reason: "seen on the profile page"}))
	require.Equal(t, 1, claimed(operator.Key), "an operator's published keeps the text")

	notSent := e.authorized("text an operator saw not sent")
	e.expireLease(notSent.Key)
	require.NoError(t, e.l.Park(e.ctx, notSent.Key, ledger.Actor{Name: "alice", Reason: "checking"}))
	require.NoError(t, e.l.Resolve(e.ctx, notSent.Key, ledger.Failed, "", ledger.Actor{Name: "alice", Reason: "nothing on the profile page"}))
	require.Zero(t, claimed(notSent.Key), "an operator's failed gives the text back")
}

// A proven not-sent releases the intent's own claim on its text, never the claim another intent
// of the account took on the same text after the window.
func TestANotSentReleasesOnlyItsOwnTextClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("text_window_seconds", 60)
	first := e.authorized("the same words")
	var claimedAt time.Time
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT last_at FROM text_claims`).Scan(&claimedAt))

	res, err := e.l.Submit(e.ctx, []identity.Envelope{envelopeWithOccurrence(t, account, "the same words", "again")})
	require.NoError(t, err)
	second, err := e.l.Begin(e.ctx, res[0].Key, requestHash("again"), lease)
	require.NoError(t, err)
	a, err := e.at(second, claimedAt.Add(time.Minute)).Authorize(e.ctx, second, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "after the window the text is free (reason %s)", a.Reason)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM text_claims WHERE delivery_key = $1`, second.Key.Bytes()), "the second intent took the claim over")

	_, err = e.l.Complete(e.ctx, first, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM text_claims WHERE delivery_key = $1`, second.Key.Bytes()),
		"the first intent's not-sent leaves the second intent's claim alone")
}

// The account's bucket refills at rate_per_minute and never holds more than rate_burst tokens,
// however long it sat unused.
func TestRateBucketRefillsAtItsRateUpToItsBurst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("rate_per_minute", 60) // one token a second
	e.setPolicy("rate_burst", 2)
	start := e.dbNow()
	n := 0
	authorizeAt := func(offset time.Duration) ledger.State {
		t.Helper()
		n++
		c := e.claim("rate " + string(rune('a'+n)))
		a, err := e.at(c, start.Add(offset)).Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		return a.State
	}
	for i, step := range []struct {
		at   time.Duration
		want ledger.State
	}{
		{0, ledger.Authorized}, {0, ledger.Authorized}, {0, ledger.Failed}, // the burst, then empty
		{time.Second, ledger.Authorized}, {time.Second, ledger.Failed}, // one token a second
		{time.Hour, ledger.Authorized}, {time.Hour, ledger.Authorized}, {time.Hour, ledger.Failed}, // an hour refills the burst, no more
	} {
		require.Equal(t, step.want, authorizeAt(step.at), "authorization %d at +%s", i+1, step.at)
	}
}

// An intent was indeterminate, its lookup found nothing, a human failed it, and its next
// attempt is indeterminate again: the first attempt's lookup cannot decide the second attempt.
func TestALookupOfAnEarlierAttemptCannotResolveTheIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.indeterminate("unknown twice")
	r1, err := e.l.ClaimReconciliation(e.ctx, first.Key, newClaimToken())
	require.NoError(t, err)
	_, err = e.l.ResolveReconciliation(e.ctx, r1, ledger.NotFound, "", nil)
	require.NoError(t, err)
	require.NoError(t, e.l.Resolve(e.ctx, first.Key, ledger.Failed, "", ledger.Actor{Name: "alice", Reason: "not on the platform"}))
	require.NoError(t, e.l.Retry(e.ctx, first.Key))
	second, err := e.l.Begin(e.ctx, first.Key, requestHash("unknown twice"), lease)
	require.NoError(t, err)
	a, err := e.l.Authorize(e.ctx, second, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "reason %s", a.Reason)
	_, err = e.l.Complete(e.ctx, second, ledger.Outcome{Result: ledger.Unknown})
	require.NoError(t, err)

	_, err = e.l.ResolveReconciliation(e.ctx, r1, ledger.Found, "obj", nil)
	requireRefused(t, err, ledger.ErrInvalidTransition)
	require.Equal(t, ledger.Indeterminate, e.state(first.Key))
	r2, err := e.l.ClaimReconciliation(e.ctx, first.Key, newClaimToken())
	require.NoError(t, err, "the second attempt still has its own lookup")
	require.Equal(t, second.Token, r2.Token)
}

// A claimed lookup whose intent an operator parked in the meantime cannot resolve it: parked
// intents belong to humans.
func TestALookupResolvedAfterTheOperatorParkedIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.indeterminate("parked before the lookup returned")
	r, err := e.l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
	require.NoError(t, err)
	require.NoError(t, e.l.Park(e.ctx, c.Key, ledger.Actor{Name: "operator", Reason: "mine now"}))
	_, err = e.l.ResolveReconciliation(e.ctx, r, ledger.Found, "obj", nil)
	requireRefused(t, err, ledger.ErrInvalidTransition)
	require.Equal(t, ledger.Parked, e.state(c.Key))
}

// A fenced-out worker's late success never overrides the verdict of the attempt that held the
// fence: evidence resolves only an indeterminate intent.
func TestEvidenceNeverOverridesADecidedState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.claim("decided without a")
	e.expireLease(a.Key)
	workerB := e.ledgerWith(ledger.Config{Actor: "worker-b"})
	b, err := workerB.Begin(e.ctx, a.Key, requestHash("decided without a"), lease)
	require.NoError(t, err)
	auth, err := workerB.Authorize(e.ctx, b, inFlight, contract)
	require.NoError(t, err)
	require.True(t, auth.Authorized())
	_, err = workerB.Complete(e.ctx, b, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	_, err = e.l.Complete(e.ctx, a, ledger.Outcome{Result: ledger.Sent, ObjectID: "late", Confirmed: true})
	requireRefused(t, err, ledger.ErrFenced)

	requireRefused(t, e.l.ResolveFromEvidence(e.ctx, a.Key, "late"), ledger.ErrInvalidTransition)
	require.Equal(t, ledger.Failed, e.state(a.Key), "B's verdict stands")
}

// sourceHead is the stored head version of source id.
func (e *env) sourceHead(id string) []byte {
	e.t.Helper()
	var head []byte
	require.NoError(e.t, e.pool.QueryRow(e.ctx, `SELECT head_version FROM source_heads WHERE source_id = $1`, id).Scan(&head))
	return head
}

func sourceVersion(t testing.TB, id, body string) identity.SourceVersion {
	t.Helper()
	v, _, err := identity.NewSourceVersion(id, body)
	require.NoError(t, err)
	return v
}

// The head moved v1 -> v2 -> v3 through submitted intents; a late intent on v1 (no longer the
// previous head, but a version intents already rested on) does not turn it back.
func TestALateIntentOnAnOlderVersionNeverTurnsTheHeadBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const src = "https://example.org/a"
	e.claimWithSource("about v1", src, "first body")
	e.claimWithSource("about v2", src, "second body")
	e.claimWithSource("about v3", src, "third body")
	late := e.claimWithSource("late, about v1", src, "first body")
	require.Equal(t, sourceVersion(t, src, "third body").Bytes(), e.sourceHead(src))
	a, err := e.l.Authorize(e.ctx, late, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonSupersededSource, a.Reason)
}

// Only an intent Submit actually created moves a source's head: one for an unconfigured
// account is refused and leaves the head where it was.
func TestOnlyACreatedIntentMovesTheHead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const src = "https://example.org/c"
	c := e.claimWithSource("about v1", src, "first body")
	req := []byte(`{"text":"from nobody"}`)
	stranger, err := identity.NewEnvelope("acct-nobody", "post", "", req, "", &identity.Source{ID: src, Version: sourceVersion(t, src, "second body")})
	require.NoError(t, err)
	res, err := e.l.Submit(e.ctx, []identity.Envelope{stranger})
	require.NoError(t, err)
	require.Equal(t, ledger.UnknownAccount, res[0].Outcome)
	require.Equal(t, sourceVersion(t, src, "first body").Bytes(), e.sourceHead(src))
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "reason %s", a.Reason)
}

// A batch wants two tokens from a bucket that holds one: one intent (the first in key order)
// is authorized, the other is rate limited.
func TestAuthorizeManyTakesOnlyTheTokensTheBucketHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("rate_per_minute", 1)
	e.setPolicy("rate_burst", 3)
	for _, text := range []string{"spends a token", "spends another"} {
		e.authorized(text) // 3 -> 2 -> 1 token left
	}
	claims := []ledger.Claim{e.claim("batch one"), e.claim("batch two")}
	res, err := e.l.AuthorizeMany(e.ctx, claims, inFlight, contract)
	require.NoError(t, err)
	var reasons []ledger.Reason
	for _, r := range res {
		require.NoError(t, r.Err)
		reasons = append(reasons, r.Authorization.Reason)
	}
	require.ElementsMatch(t, []ledger.Reason{ledger.ReasonAuthorized, ledger.ReasonRateLimited}, reasons)
}

// The statements that take their target state from the caller accept only the states their
// transition may lead to, whatever the Go above them passes: no completion, operator verdict
// or lookup result can reopen an intent to pending.
func TestStatementsRefuseTargetStatesOutsideTheirTransitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := dbsqlc.New(e.app)

	c := e.authorized("completed to pending?")
	_, err := q.IntentsComplete(e.ctx, dbsqlc.IntentsCompleteParams{
		DeliveryKeys: [][]byte{c.Key.Bytes()}, AttemptTokens: [][]byte{c.Token.Bytes()},
		Epochs: []int64{c.Epoch}, Generations: []int64{c.Generation},
		ToStates: []string{string(ledger.Pending)}, Reasons: []string{"retried"}, ObjectIds: []string{""},
		Outcomes: []string{string(ledger.NotSent)}, Details: []string{"{}"}, Actor: "buggy worker",
	})
	require.NoError(t, err)
	require.Equal(t, ledger.Authorized, e.state(c.Key), "Complete leads only to published, failed or indeterminate")

	parked := e.submit("resolved to pending?")
	require.NoError(t, e.l.Park(e.ctx, parked, ledger.Actor{Name: "alice", Reason: "look"}))
	_, err = q.IntentResolve(e.ctx, dbsqlc.IntentResolveParams{
		DeliveryKey: parked.Bytes(), ToState: string(ledger.Pending), Reason: "retried", Actor: "alice", Detail: []byte("{}"),
	})
	require.NoError(t, err)
	require.Equal(t, ledger.Parked, e.state(parked), "an operator resolves only to published or failed")

	unknown := e.indeterminate("looked up to pending?")
	r, err := e.l.ClaimReconciliation(e.ctx, unknown.Key, newClaimToken())
	require.NoError(t, err)
	_, err = q.ReconciliationResolve(e.ctx, dbsqlc.ReconciliationResolveParams{
		DeliveryKey: unknown.Key.Bytes(), Result: string(ledger.NotFound), Actor: "buggy reconciler", Detail: []byte("{}"),
		AttemptToken: r.Token.Bytes(), ToState: string(ledger.Pending), Reason: "retried", ClaimToken: r.Claim[:],
	})
	require.NoError(t, err)
	require.Equal(t, ledger.Indeterminate, e.state(unknown.Key), "a lookup leads only to published, failed or parked")
}
