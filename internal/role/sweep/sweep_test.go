package sweep_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// Expired leases go one way: a claim that never reached authorization is abandoned (the
// intent is free, with new work), an authorization becomes indeterminate (never pending, no
// work). Live leases are left alone. Every transition reaches ATMOST_EVENTS.
func TestExpiredLeasesAreAbandonedBeforeAuthorizationAndIndeterminateAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	claims := e.claimed(e.Submit("acct-1", worldtest.Texts("claimed", 3)...))
	auths := e.authorized(e.Submit("acct-1", worldtest.Texts("authorized", 3)...))
	live := e.authorized(e.Submit("acct-1", "authorized, lease live"))
	var expired []identity.DeliveryKey
	for _, c := range append(claims, auths...) {
		expired = append(expired, c.Key)
	}
	e.expire(expired)
	e.purgeWork()

	r, err := e.sweeper("sweeper-1", sweep.Config{}).Pass(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, 3, r.Abandoned)
	require.Equal(t, 3, r.LeaseExpired)
	for _, c := range claims {
		in := e.Intent(c.Key)
		require.Equal(t, ledger.Pending, in.State)
		require.Equal(t, ledger.ReasonAbandoned, in.Reason)
		require.Nil(t, in.LeaseExpiresAt)
	}
	for _, c := range auths {
		in := e.Intent(c.Key)
		require.Equal(t, ledger.Indeterminate, in.State)
		require.Equal(t, ledger.ReasonLeaseExpired, in.Reason)
	}
	require.Equal(t, ledger.Authorized, e.Intent(live[0].Key).State)
	require.Equal(t, 3, e.streamCount(events.DispatchStream, events.DispatchSubjects), "new work for the abandoned claims only")
	e.EventsMatchHistory()
}

// One pass ends expired leases beyond one batch, a batch at a time, up to ExpireBatches
// batches; what is left waits for the next pass.
func TestOnePassExpiresLeasesBatchAfterBatchUpToItsBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const batch = 2
	claims := e.claimed(e.Submit("acct-1", worldtest.Texts("claimed", batch*sweep.ExpireBatches+1)...))
	var keys []identity.DeliveryKey
	for _, c := range claims {
		keys = append(keys, c.Key)
	}
	e.expire(keys)
	s := e.sweeper("sweeper-1", sweep.Config{Batch: batch})

	r, err := s.Pass(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, batch*sweep.ExpireBatches, r.Abandoned, "every batch up to the bound, not one")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM intents WHERE lease_expires_at IS NOT NULL`), "one lease is left past the bound")
	r, err = s.Pass(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, r.Abandoned, "the next pass ends it")
}

// A pending intent whose work item was lost gets a new one after StrandedAfter; a second pass
// of the same round (or a second sweeper) adds no copy; intents held by a kill switch or
// claimed by a worker, and fresh ones, get none.
func TestStrandedPendingWorkIsPublishedAgainOncePerRound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	lost := e.Submit("acct-1", worldtest.Texts("lost work", 4)...)
	stopped := e.Submit("acct-2", worldtest.Texts("held by a kill switch", 2)...)
	claimed := e.claimed(e.Submit("acct-1", "claimed"))
	fresh := e.Submit("acct-1", "fresh")
	e.purgeWork()
	e.age(lost, time.Hour)
	e.age(stopped, time.Hour)
	e.age([]identity.DeliveryKey{claimed[0].Key}, time.Hour)
	_, err := e.Ledger.SetSwitch(e.Ctx, "acct-2", true, ledger.Actor{Name: "test", Reason: "maintenance"})
	require.NoError(t, err)

	cfg := sweep.Config{StrandedAfter: time.Hour}
	r, err := e.sweeper("sweeper-1", cfg).Pass(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, 4, r.Republished)
	r, err = e.sweeper("sweeper-2", cfg).Pass(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, 4, r.Republished, "published again, and dropped by JetStream as a duplicate of this round")
	require.Equal(t, 4, e.streamCount(events.DispatchStream, events.DispatchSubjects))

	c, err := e.JS.CreateOrUpdateConsumer(e.Ctx, events.DispatchStream, jetstream.ConsumerConfig{Durable: "look", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	batch, err := c.FetchNoWait(10)
	require.NoError(t, err)
	got := map[identity.DeliveryKey]bool{}
	for m := range batch.Messages() {
		w, err := events.UnmarshalWorkItem(m.Data())
		require.NoError(t, err)
		got[w.DeliveryKey] = true
		require.Equal(t, events.NewID(w.DeliveryKey, e.Intent(w.DeliveryKey).Seq), w.Event)
	}
	require.Len(t, got, 4)
	for _, k := range lost {
		require.True(t, got[k], "work for %s", k)
	}
	_ = fresh
}

// Failed intents are retried only for a retryable reason, at most cap times in all, then
// parked; a non-retryable failure is never retried automatically. Retried intents get work.
func TestFailedIntentsAreRetriedByPolicyThenParkedAtTheCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`UPDATE policies SET attempt_cap = 2 WHERE scope = ''`)
	retryable := e.Submit("acct-1", worldtest.Texts("connection refused", 3)...)
	e.failed(retryable)
	rejected := e.Submit("acct-1", "rejected")
	for _, c := range e.authorized(rejected) {
		_, err := e.Ledger.Complete(e.Ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonPlatformRejected})
		require.NoError(t, err)
	}
	e.purgeWork()
	s := e.sweeper("sweeper-1", sweep.Config{})

	r, err := s.Pass(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, 3, r.Retried)
	require.Equal(t, 3, e.streamCount(events.DispatchStream, events.DispatchSubjects), "one work item per retried intent")
	for _, k := range retryable {
		require.Equal(t, ledger.Pending, e.Intent(k).State)
	}
	e.failed(retryable) // the second attempt fails too
	r, err = s.Pass(e.Ctx)
	require.NoError(t, err)
	require.Zero(t, r.Retried)
	require.Equal(t, 3, r.Exhausted)
	for _, k := range retryable {
		in := e.Intent(k)
		require.Equal(t, ledger.Parked, in.State)
		require.Equal(t, ledger.ReasonAttemptsExhausted, in.Reason)
		require.Equal(t, 2, in.AttemptsAuthorized)
	}
	for range 3 {
		r, err = s.Pass(e.Ctx)
		require.NoError(t, err)
		require.Zero(t, r.Retried+r.Exhausted)
	}
	require.Equal(t, ledger.Failed, e.Intent(rejected[0]).State, "platform_rejected is not retryable by the default policy")
	e.EventsMatchHistory()
}

// Raising a cap, then a rate, over a backlog of 1,000 failed intents releases them at the
// policy's rate, never all at once: after each pass the released count stays within the
// bucket's burst plus the rate times the time elapsed.
func TestRaisingACapOrARateReleasesABacklogAtThePolicyRate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const backlog = 1000
	keys := e.Submit("acct-1", worldtest.Texts("backlog", backlog)...)
	// A backlog at its cap: each intent failed once, with cap 1 it would be parked; the
	// operator raises the cap before the sweeper gets to it.
	e.Exec(`UPDATE intents SET state = 'failed', reason = 'connection_failed', attempts_authorized = 1, updated_at = now() - INTERVAL '1 hour'`)
	e.Exec(`UPDATE policies SET attempt_cap = 1, rate_per_minute = 600, rate_burst = 20 WHERE scope = ''`)
	e.Exec(`UPDATE policies SET attempt_cap = 3 WHERE scope = ''`)
	s := e.sweeper("sweeper-1", sweep.Config{Batch: 2000})
	released := func() int { return e.Count(`SELECT count(*) FROM intents WHERE state = 'pending'`) }

	// Passes for 3 s, and on until the burst and 20 more are out: on a busy machine a pass can
	// take a second, and the release is waited for, never timed. A minute without it is a hang.
	start := time.Now()
	for n := released(); time.Since(start) < 3*time.Second || n < 20+20; {
		require.Less(t, time.Since(start), time.Minute, "the burst at once, then about 10 a second: %d released", n)
		_, err := s.Pass(e.Ctx)
		require.NoError(t, err)
		n = released()
		bound := 20 + int(time.Since(start).Seconds()*10) + 1 // burst + 600/min
		require.LessOrEqual(t, n, bound, "after %s", time.Since(start))
		time.Sleep(100 * time.Millisecond)
	}
	first := released()

	// Raising the rate tenfold releases ten times faster, still not all at once.
	e.Exec(`UPDATE policies SET rate_per_minute = 6000 WHERE scope = ''`)
	start = time.Now()
	for n := first; time.Since(start) < 2*time.Second || n <= first+100; {
		require.Less(t, time.Since(start), time.Minute, "about 100 a second: %d released after the first %d", n-first, first)
		_, err := s.Pass(e.Ctx)
		require.NoError(t, err)
		n = released()
		bound := first + 20 + int(time.Since(start).Seconds()*100) + 1
		require.LessOrEqual(t, n, bound, "after %s at 6000/min", time.Since(start))
		time.Sleep(100 * time.Millisecond)
	}
	require.Less(t, released(), backlog, "never the whole backlog at once")
	require.Equal(t, backlog, released()+e.Count(`SELECT count(*) FROM intents WHERE state = 'failed'`), "nothing parked, nothing lost")
	_ = keys
}

// Indeterminate intents no reconciler will finish are parked: a claimed lookup that never
// resolved (its reconciler died) and an intent no lookup was ever claimed for in time.
func TestUnreconciledIntentsAreParkedForAHuman(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	auths := e.authorized(e.Submit("acct-1", worldtest.Texts("unknown", 3)...))
	for _, c := range auths {
		_, err := e.Ledger.Complete(e.Ctx, c, ledger.Outcome{Result: ledger.Unknown})
		require.NoError(t, err)
	}
	_, err := e.Ledger.ClaimReconciliation(e.Ctx, auths[0].Key, newClaimToken())
	require.NoError(t, err)
	e.Exec(`UPDATE reconciliations SET at = now() - INTERVAL '1 hour'`)
	e.age([]identity.DeliveryKey{auths[1].Key}, 48*time.Hour)

	r, err := e.sweeper("sweeper-1", sweep.Config{}).Pass(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, r.LookupLost)
	require.Equal(t, 1, r.NeverReconciled)
	require.Equal(t, ledger.Parked, e.Intent(auths[0].Key).State)
	require.Equal(t, ledger.Parked, e.Intent(auths[1].Key).State)
	require.Equal(t, ledger.Indeterminate, e.Intent(auths[2].Key).State, "still within its deadline")
	e.EventsMatchHistory()
}

// Two sweepers at once over every kind of work: each intent moves once per duty, the retry
// budget is shared, and every transition is on ATMOST_EVENTS exactly once.
func TestTwoSweepersAtOnceMoveEachIntentOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	claims := e.claimed(e.Submit("acct-1", worldtest.Texts("claimed", 20)...))
	auths := e.authorized(e.Submit("acct-1", worldtest.Texts("authorized", 20)...))
	e.Exec(`UPDATE policies SET rate_per_minute = 60, rate_burst = 10 WHERE scope = ''`)
	failedKeys := e.Submit("acct-1", worldtest.Texts("failed", 40)...)
	e.Exec(`UPDATE intents SET state = 'failed', reason = 'connection_failed', updated_at = now() - INTERVAL '1 hour' WHERE reason = 'submitted'`)
	_ = failedKeys
	var expired []identity.DeliveryKey
	for _, c := range append(claims, auths...) {
		expired = append(expired, c.Key)
	}
	e.expire(expired)

	start := time.Now()
	var wg sync.WaitGroup
	for i := range 2 {
		s := e.sweeper(fmt.Sprintf("sweeper-%d", i), sweep.Config{})
		wg.Go(func() {
			for range 10 {
				_, err := s.Pass(e.Ctx)
				assert.NoError(t, err) // not require: FailNow belongs to the test's goroutine
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	require.Equal(t, 20, e.Count(`SELECT count(*) FROM history WHERE reason = 'abandoned'`))
	require.Equal(t, 20, e.Count(`SELECT count(*) FROM history WHERE reason = 'lease_expired'`))
	retried := e.Count(`SELECT count(*) FROM history WHERE reason = 'retried'`)
	require.LessOrEqual(t, retried, 10+int(elapsed.Seconds())+1, "one budget: burst 10 plus one a second over %s", elapsed)
	require.GreaterOrEqual(t, retried, 10)
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM (SELECT delivery_key, reason FROM history GROUP BY 1, 2 HAVING count(*) > 1) d`),
		"no intent took the same transition twice")
	e.EventsMatchHistory()
}
