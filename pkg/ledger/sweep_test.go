package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// age moves an intent's last transition into the past, as if it had rested that long.
func (e *env) age(key identity.DeliveryKey, d time.Duration) {
	e.t.Helper()
	e.exec(`UPDATE intents SET updated_at = now() - $2::BIGINT * INTERVAL '1 millisecond' WHERE delivery_key = $1`, key.Bytes(), d.Milliseconds())
}

// failed submits, authorizes and completes an intent as not sent, for reason.
func (e *env) failed(text string, reason ledger.Reason) identity.DeliveryKey {
	e.t.Helper()
	c := e.authorized(text)
	// Neutral: these are tests of retries, not of the account's health, whose suspect slot
	// would leave the next attempts uncounted (suspect_test.go).
	res, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: reason, Signal: ledger.SignalNeutral})
	require.NoError(e.t, err)
	require.Equal(e.t, ledger.Failed, res.State)
	return c.Key
}

func TestStrandedPendingFindsOnlyUnclaimedIntentsIdlePastTheThreshold(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	idle := e.submit("idle and unclaimed")
	fresh := e.submit("just submitted")
	claimed := e.claim("claimed by a live worker")
	e.age(idle, time.Hour)
	e.age(claimed.Key, time.Hour)
	published := e.authorized("authorized long ago")
	e.age(published.Key, time.Hour)

	got, err := e.l.StrandedPending(e.ctx, 10*time.Minute, 100)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, idle, got[0].Key)
	require.Equal(t, account, got[0].Account)
	require.Equal(t, e.intent(idle).Seq, got[0].Seq, "the work item names the event of the latest transition")
	_ = fresh

	_, err = e.l.StrandedPending(e.ctx, 0, 100)
	require.Error(t, err)
}

// Only failed intents whose reason the policy retries are retried, only after their backoff,
// and a failure whose reason is not retryable is never touched.
func TestRetryDueRetriesRetryableReasonsAfterTheBackoffOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("backoff_base_ms", 60_000)
	always := e.failed("connection refused", ledger.ReasonConnectionFailed)
	// A kill switch engaged between Begin and Authorize fails the attempt: nothing was sent.
	stopped := e.claim("kill switch at authorization")
	e.exec(`INSERT INTO switches (scope, engaged, actor) VALUES ('', true, 'test')`)
	a, err := e.l.Authorize(e.ctx, stopped, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonKillSwitch, a.Reason)
	e.exec(`DELETE FROM switches`)
	byPolicy := stopped.Key
	notListed := e.failed("rejected by the platform", ledger.ReasonPlatformRejected)
	tooSoon := e.failed("failed a second ago", ledger.ReasonConnectionFailed)
	for _, k := range []identity.DeliveryKey{always, byPolicy, notListed} {
		e.age(k, 2*time.Minute)
	}

	pass, err := e.l.RetryDue(e.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 2, pass.Retried)
	require.Zero(t, pass.Exhausted)
	require.ElementsMatch(t, []identity.DeliveryKey{always, byPolicy}, pass.Changed)
	require.Equal(t, ledger.Pending, e.state(always))
	require.Equal(t, ledger.Pending, e.state(byPolicy))
	require.Equal(t, ledger.Failed, e.state(notListed), "platform_rejected is not in the default policy's list")
	require.Equal(t, ledger.Failed, e.state(tooSoon), "its backoff has not passed")
	require.Equal(t, 1, e.attempts(always), "a retry writes no attempt row")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1 AND seq = $2 AND dispatch`, always.Bytes(), e.intent(always).Seq),
		"a retried intent gets a work item")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND reason = 'retried' AND actor = 'test'`, always.Bytes()))

	// The backoff grows by the policy's factor (2) with each counted attempt: base 60 s, the
	// second 120 s, of which equal jitter waits between half and all: 60 to 120 s.
	c, err := e.l.Begin(e.ctx, always, requestHash("connection refused"), lease)
	require.NoError(t, err)
	_, err = e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	e.age(always, 59*time.Second)
	pass, err = e.l.RetryDue(e.ctx, 100)
	require.NoError(t, err)
	require.Zero(t, pass.Retried, "59 s is short of half the second backoff (120 s)")
	e.age(always, 121*time.Second)
	pass, err = e.l.RetryDue(e.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, pass.Retried)

	// Listing the reason in the account's policy makes it retryable from the next pass on.
	e.exec(`INSERT INTO policies (scope, retryable_reasons, updated_by) VALUES ($1, ARRAY['platform_rejected'], 'test')`, account)
	pass, err = e.l.RetryDue(e.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, []identity.DeliveryKey{notListed}, pass.Changed)
	require.Equal(t, ledger.Pending, e.state(notListed))
}

// failedFor stores an intent of acct and fails it straight in the database for reason, an
// hour ago: the scene of a retry, whatever gate the reason names.
func (e *env) failedFor(acct, text string, reason ledger.Reason) identity.DeliveryKey {
	e.t.Helper()
	res, err := e.l.Submit(e.ctx, []identity.Envelope{envelope(e.t, acct, text)})
	require.NoError(e.t, err)
	e.exec(`UPDATE intents SET state = 'failed', reason = $2, transition_seq = transition_seq + 1, updated_at = now() - INTERVAL '1 hour' WHERE delivery_key = $1`,
		res[0].Key.Bytes(), string(reason))
	return res[0].Key
}

// An account's own retryable list governs its own intents: a reason another account's policy
// lists, or the default's list that the account's own replaces, retries nothing of it.
func TestRetryDueFollowsEachAccountsOwnRetryableReasons(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("backoff_base_ms", 0)
	e.addAccount("acct-2")
	// The default lists kill_switch; acct-1 retries nothing by policy, acct-2 platform_rejected.
	e.exec(`INSERT INTO policies (scope, retryable_reasons, updated_by) VALUES ($1, '{}', 'test'), ('acct-2', '{platform_rejected}', 'test')`, account)
	listedElsewhere := e.failedFor(account, "listed by acct-2's policy only", ledger.ReasonPlatformRejected)
	listedByDefault := e.failedFor(account, "listed by the default acct-1 replaced", ledger.ReasonKillSwitch)
	always := e.failedFor(account, "retried whatever the policy", ledger.ReasonAccountDisabled)
	governed := e.failedFor(account, "the policy governs connection failures too", ledger.ReasonConnectionFailed)
	theirs := e.failedFor("acct-2", "listed by its own policy", ledger.ReasonPlatformRejected)

	pass, err := e.l.RetryDue(e.ctx, 100)
	require.NoError(t, err)
	require.ElementsMatch(t, []identity.DeliveryKey{always, theirs}, pass.Changed)
	require.Equal(t, ledger.Failed, e.state(governed), "a policy that retries nothing retried a connection failure")
	require.Equal(t, ledger.Failed, e.state(listedElsewhere), "another account's list retried it")
	require.Equal(t, ledger.Failed, e.state(listedByDefault), "the default's list retried it")
}

// beforeWrite is a ledger's database that runs fn, once, before the first transaction that is
// not read-only: for RetryDue, between its read of the candidates and its retry of them.
type beforeWrite struct {
	ledger.DB
	once sync.Once
	fn   func()
}

func (b *beforeWrite) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	if opts.AccessMode != pgx.ReadOnly {
		b.once.Do(b.fn)
	}
	return b.DB.BeginTx(ctx, opts)
}

// The sweeper's retry decides on the intent as it stands under the row lock, not as its read of
// the candidates found it a moment before: an intent whose reason the account's policy stopped
// retrying since, or that was retried and failed again since (for a reason the policy does not
// retry, or inside the backoff of its new failure), is left failed.
func TestRetryDueDecidesOnTheIntentAsItIsUnderTheRowLock(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		e.setPolicy("backoff_base_ms", 60_000)
		failAgain := func(key identity.DeliveryKey, text string, reason ledger.Reason) func() {
			return func() {
				require.NoError(t, e.l.Retry(e.ctx, key))
				c, err := e.l.Begin(e.ctx, key, requestHash(text), lease)
				require.NoError(t, err)
				_, err = e.l.Authorize(e.ctx, c, inFlight, contract)
				require.NoError(t, err)
				_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: reason})
				require.NoError(t, err)
			}
		}
		for name, scene := range map[string]func(acct, text string) (identity.DeliveryKey, func()){
			"its policy stopped retrying the reason": func(acct, text string) (identity.DeliveryKey, func()) {
				key := e.failedFor(acct, text, ledger.ReasonKillSwitch) // the default lists kill_switch
				return key, func() {
					e.exec(`INSERT INTO policies (scope, retryable_reasons, updated_by) VALUES ($1, '{}', 'operator')`, acct)
				}
			},
			"it failed again, for a reason its policy does not retry": func(acct, text string) (identity.DeliveryKey, func()) {
				key := e.failedFor(acct, text, ledger.ReasonConnectionFailed)
				return key, failAgain(key, text, ledger.ReasonPlatformRejected)
			},
			"it failed again, inside its new backoff": func(acct, text string) (identity.DeliveryKey, func()) {
				key := e.failedFor(acct, text, ledger.ReasonConnectionFailed)
				return key, failAgain(key, text, ledger.ReasonConnectionFailed)
			},
		} {
			acct := "stale: " + name
			e.addAccount(acct)
			key, meanwhile := scene(acct, name)
			sweeper, err := ledger.New(&beforeWrite{DB: e.app, fn: meanwhile}, ledger.Config{Actor: "sweeper", Isolation: e.iso})
			require.NoError(t, err)
			pass, err := sweeper.RetryDue(e.ctx, 100)
			require.NoError(t, err, name)
			require.Zero(t, pass.Retried, name)
			require.Empty(t, pass.Changed, name)
			require.Equal(t, ledger.Failed, e.state(key), name)
			require.Zero(t, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND actor = 'sweeper'`, key.Bytes()), name)
		}
	})
}

// A refill by a sweeper whose transaction began before another's refill committed (READ
// COMMITTED: its now() is its transaction's start) neither moves the refill time back, which
// would credit the same interval twice, nor takes tokens away for the negative interval.
func TestARetryBucketRefillFromAnEarlierTransactionChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	earlier, err := e.app.BeginTx(e.ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	defer func() { _ = earlier.Rollback(e.ctx) }()
	var began time.Time
	require.NoError(t, earlier.QueryRow(e.ctx, `SELECT now()`).Scan(&began))

	bucket := dbsqlc.RetryBucketRefillParams{AccountID: account, RateBurst: 5, RatePerMinute: 60}
	q := dbsqlc.New(e.app)
	_, err = q.RetryBucketRefill(e.ctx, bucket) // another sweeper's, begun and committed since
	require.NoError(t, err)
	var refilledAt time.Time
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT refilled_at FROM retry_buckets`).Scan(&refilledAt))
	require.True(t, refilledAt.After(began), "the scene: the other refill is the later one")
	require.NoError(t, q.RetryBucketSpend(e.ctx, dbsqlc.RetryBucketSpendParams{AccountID: account, Spent: 2}))

	tokens, err := dbsqlc.New(earlier).RetryBucketRefill(e.ctx, bucket)
	require.NoError(t, err)
	require.NoError(t, earlier.Commit(e.ctx))
	require.GreaterOrEqual(t, tokens, 3.0, "a refill dated before the last one took tokens away")
	var after time.Time
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT refilled_at FROM retry_buckets`).Scan(&after))
	require.Equal(t, refilledAt, after, "the refill time moved back")
}

// A retryable failure is retried at most cap times (counting authorized attempts), then parked
// attempts_exhausted: never pending again.
func TestRetryDueParksAnIntentAtItsAttemptCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("attempt_cap", 2)
	e.setPolicy("backoff_base_ms", 0)
	key := e.failed("fails every time", ledger.ReasonConnectionFailed)
	retried := 0
	for range 5 {
		pass, err := e.l.RetryDue(e.ctx, 100)
		require.NoError(t, err)
		retried += pass.Retried
		if pass.Exhausted == 1 {
			break
		}
		c, err := e.l.Begin(e.ctx, key, requestHash("fails every time"), lease)
		require.NoError(t, err)
		_, err = e.l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		// A failure that says nothing of the platform (the dispatcher's own not-sent): each
		// attempt counts. One sent while the platform is seen failing does not
		// (TestALoneIntentDueThroughAnOutageIsNotParkedAtTheTrip).
		_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed, Signal: ledger.SignalNeutral})
		require.NoError(t, err)
	}
	require.Equal(t, 1, retried, "cap 2: the first attempt and one retry")
	in := e.intent(key)
	require.Equal(t, ledger.Parked, in.State)
	require.Equal(t, ledger.ReasonAttemptsExhausted, in.Reason)
	require.Equal(t, 2, e.attempts(key))
}

// Parking at the attempt cap spends no retry token, so the rate does not bound it either: a pass
// parks every failed intent at its cap, however many more than the bucket's burst.
func TestRetryDueParksEveryIntentAtItsCapWhateverTheRate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("backoff_base_ms", 0)
	e.setPolicy("rate_per_minute", 60)
	e.setPolicy("rate_burst", 2)
	var keys []identity.DeliveryKey
	for i := range 5 {
		key := e.failedFor(account, fmt.Sprintf("at its cap %d", i), ledger.ReasonConnectionFailed)
		e.exec(`UPDATE intents SET attempts_authorized = 3 WHERE delivery_key = $1`, key.Bytes())
		keys = append(keys, key)
	}
	pass, err := e.l.RetryDue(e.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 5, pass.Exhausted)
	require.Zero(t, pass.Retried)
	for _, k := range keys {
		require.Equal(t, ledger.Parked, e.state(k))
	}
}

// The retry bucket releases a backlog at the policy's rate: a pass takes at most the burst,
// the next pass only what refilled since, and two sweepers at once share one budget.
func TestRetryDueReleasesABacklogAtThePolicyRate(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		e.setPolicy("backoff_base_ms", 0)
		e.setPolicy("rate_per_minute", 60) // one a second
		e.setPolicy("rate_burst", 5)
		const backlog = 40
		var keys []identity.DeliveryKey
		for i := range backlog {
			keys = append(keys, e.submit(fmt.Sprintf("backlog %d", i)))
		}
		// Fail them straight in the database: the rate limit would stop authorizing them.
		for _, k := range keys {
			e.exec(`UPDATE intents SET state = 'failed', reason = 'connection_failed', updated_at = now() - INTERVAL '1 hour' WHERE delivery_key = $1`, k.Bytes())
		}
		start := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		total := 0
		for s := range 2 {
			l := e.ledgerWith(ledger.Config{Actor: fmt.Sprintf("sweeper-%d", s)})
			wg.Go(func() {
				for range 20 {
					pass, err := l.RetryDue(e.ctx, 1000)
					mu.Lock()
					total += pass.Retried
					errs = append(errs, err)
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		elapsed := time.Since(start)
		bound := 5 + int(elapsed.Seconds()) + 1
		require.LessOrEqual(t, total, bound, "burst 5 plus one a second over %s", elapsed)
		require.GreaterOrEqual(t, total, 5, "the burst is released at once")
		require.Equal(t, total, e.count(`SELECT count(*) FROM intents WHERE state = 'pending'`))
		require.Equal(t, backlog-total, e.count(`SELECT count(*) FROM intents WHERE state = 'failed'`))
	})
}

func TestParkUnreconciledParksLostLookupsAndForgottenIntentsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lost := e.indeterminate("reconciler died after its claim")
	rec, err := e.l.ClaimReconciliation(e.ctx, lost.Key, newClaimToken())
	require.NoError(t, err)
	e.exec(`UPDATE reconciliations SET at = now() - INTERVAL '1 hour' WHERE delivery_key = $1`, lost.Key.Bytes())

	busy := e.indeterminate("reconciler looking right now")
	_, err = e.l.ClaimReconciliation(e.ctx, busy.Key, newClaimToken())
	require.NoError(t, err)
	e.age(busy.Key, 48*time.Hour)

	forgotten := e.indeterminate("no reconciler ever came")
	e.age(forgotten.Key, 48*time.Hour)
	waiting := e.indeterminate("waiting for its reconcile delay")

	n, err := e.l.ParkUnreconciled(e.ctx, 10*time.Minute, 24*time.Hour, 100)
	require.NoError(t, err)
	require.Equal(t, 1, n.LookupLost)
	require.Equal(t, 1, n.NeverReconciled)
	require.ElementsMatch(t, []identity.DeliveryKey{lost.Key, forgotten.Key}, n.Changed)
	for _, k := range []identity.DeliveryKey{lost.Key, forgotten.Key} {
		in := e.intent(k)
		require.Equal(t, ledger.Parked, in.State)
		require.Equal(t, ledger.ReasonReconcileUnavailable, in.Reason)
	}
	require.Equal(t, ledger.Indeterminate, e.state(busy.Key), "a fresh claim is a reconciler at work")
	require.Equal(t, ledger.Indeterminate, e.state(waiting.Key))

	// The lost lookup is closed: the reconciler that wakes up late cannot resolve it, and no
	// second lookup can be claimed.
	_, err = e.l.ResolveReconciliation(e.ctx, rec, ledger.Found, "late-object", nil)
	requireRefused(t, err, ledger.ErrInvalidTransition)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM reconciliations WHERE delivery_key = $1 AND step = 'resolved' AND result = 'unavailable'`, lost.Key.Bytes()))
	_, err = e.l.ClaimReconciliation(e.ctx, forgotten.Key, newClaimToken())
	requireRefused(t, err, ledger.ErrInvalidTransition)

	again, err := e.l.ParkUnreconciled(e.ctx, 10*time.Minute, 24*time.Hour, 100)
	require.NoError(t, err)
	require.Empty(t, again.Changed)
}

func TestReconcileCandidatesAndStatusReadTheDatabaseClock(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.indeterminate("indeterminate for a minute")
	e.age(old.Key, time.Minute)
	young := e.indeterminate("indeterminate just now")
	claimed := e.indeterminate("claimed already")
	e.age(claimed.Key, time.Minute)
	_, err := e.l.ClaimReconciliation(e.ctx, claimed.Key, newClaimToken())
	require.NoError(t, err)

	got, err := e.l.ReconcileCandidates(e.ctx, 30*time.Second, ledger.ReconcileCandidate{}, 100)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, old.Key, got[0].Key)
	next, err := e.l.ReconcileCandidates(e.ctx, 30*time.Second, got[0], 100)
	require.NoError(t, err)
	require.Empty(t, next, "the cursor is past the only candidate")

	backlog, err := e.l.ReconcileBacklog(e.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), backlog.Waiting, "the old and the young one; the claimed one waits for no lookup")
	require.InDelta(t, time.Minute.Seconds(), backlog.Oldest.Seconds(), 5)

	st, err := e.l.ReconcileStatusOf(e.ctx, old.Key)
	require.NoError(t, err)
	require.Equal(t, ledger.Indeterminate, st.Intent.State)
	require.InDelta(t, time.Minute.Seconds(), st.Age.Seconds(), 5)
	require.False(t, st.Claimed)
	st, err = e.l.ReconcileStatusOf(e.ctx, claimed.Key)
	require.NoError(t, err)
	require.True(t, st.Claimed)
	require.False(t, st.Resolved)
	st, err = e.l.ReconcileStatusOf(e.ctx, young.Key)
	require.NoError(t, err)
	require.Less(t, st.Age, 30*time.Second)
	_, err = e.l.ReconcileStatusOf(e.ctx, identity.DeliveryKey{})
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

// A sweeper that parks "never reconciled" intents waits on a reconciler's claim committing
// meanwhile: the claim stands and the intent is not parked (its snapshot predates the claim,
// so the statement's own insert of a claim decides, on the primary key).
func TestSweeperThatWaitedOnAClaimLeavesTheLookupToItsReconciler(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.indeterminate("the reconciler claims it just now")
		e.age(c.Key, 48*time.Hour)
		var parked ledger.Unreconciled
		claimErr, parkErr := e.interleave(1, func(l *ledger.Ledger) error {
			_, err := l.ClaimReconciliation(e.ctx, c.Key, newClaimToken())
			return err
		}, func() (err error) {
			parked, err = e.l.ParkUnreconciled(e.ctx, time.Hour, 24*time.Hour, 10)
			return err
		})
		require.NoError(t, claimErr)
		require.NoError(t, parkErr)
		require.Zero(t, parked.NeverReconciled)
		require.Equal(t, ledger.Indeterminate, e.state(c.Key), "the reconciler's lookup decides")
		require.Equal(t, 1, e.count(`SELECT count(*) FROM reconciliations WHERE delivery_key = $1`, c.Key.Bytes()))
	})
}

// Outstanding counts every intent not published, by state, parked ones included, and no
// published one.
func TestOutstandingCountsEveryStateButPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.submit("pending")
	e.claim("claimed, still pending")
	e.authorized("authorized")
	failed := e.authorized("failed")
	_, err := e.l.Complete(e.ctx, failed, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	unknown := e.authorized("indeterminate")
	_, err = e.l.Complete(e.ctx, unknown, ledger.Outcome{Result: ledger.Unknown})
	require.NoError(t, err)
	for _, text := range []string{"parked 1", "parked 2"} {
		require.NoError(t, e.l.Park(e.ctx, e.submit(text), ledger.Actor{Name: "operator", Reason: "stop"}))
	}
	published := e.authorized("published")
	_, err = e.l.Complete(e.ctx, published, ledger.Outcome{Result: ledger.Sent, ObjectID: "o", Confirmed: true})
	require.NoError(t, err)

	counts, err := e.l.Outstanding(e.ctx)
	require.NoError(t, err)
	require.Equal(t, map[ledger.State]int64{ledger.Pending: 2, ledger.Authorized: 1, ledger.Failed: 1, ledger.Indeterminate: 1, ledger.Parked: 2}, counts)
}
