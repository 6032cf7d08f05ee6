package dispatch_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// The normal path: every intent is sent once, read back, and published; its history shows
// each step, and every transition reached ATMOST_EVENTS.
func TestEveryIntentIsSentOnceReadBackAndPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.Submit("acct-1", worldtest.Texts("hello", 40)...)
	e.run(e.config())
	intents := e.settle(keys, 20*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 40}, states(intents))
	for _, k := range keys {
		require.Equal(t, 1, e.sim.Created(k.String()), "one object for %s", k)
		require.Equal(t, 1, e.sim.Received(k.String()), "one request for %s", k)
		rec, err := e.Ledger.Inspect(e.Ctx, k)
		require.NoError(t, err)
		var path []ledger.Reason
		for _, tr := range rec.Transitions {
			path = append(path, tr.Reason)
		}
		require.Equal(t, []ledger.Reason{ledger.ReasonSubmitted, ledger.ReasonClaimed, ledger.ReasonAuthorized, ledger.ReasonPublished}, path)
		require.Len(t, rec.Attempts, 1)
		require.NotEmpty(t, rec.Intent.ObjectID)
	}
	// The dispatcher published its own transitions: the outbox is empty.
	require.Zero(t, e.Count(`SELECT count(*) FROM outbox`))
}

// Every fault of the simulator's plan ends in the state the error -> outcome table gives it,
// and nothing is ever sent twice.
func TestEveryFaultEndsInItsDeclaredState(t *testing.T) {
	t.Parallel()
	script := []platformsim.Fault{platformsim.FaultOK, platformsim.FaultDropBeforeRead, platformsim.FaultDropAfterRead,
		platformsim.FaultDropAfterCommit, platformsim.FaultErrorAfterCommit, platformsim.FaultDelay,
		platformsim.FaultRateLimited, platformsim.FaultReject}
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: script, Delay: 3 * time.Second}})
	keys := e.Submit("acct-1", worldtest.Texts("fault", len(script))...)
	e.run(e.config()) // send timeout 2 s: the delay fault outlasts it
	intents := e.settle(keys, 30*time.Second)
	// ok -> published; a dropped connection (before or after reading, or after committing),
	// a 500 and a timeout -> indeterminate; 429 and 422 -> failed, nothing created.
	require.Equal(t, map[ledger.State]int{ledger.Published: 1, ledger.Indeterminate: 5, ledger.Failed: 2}, states(intents))
	reasons := map[ledger.Reason]int{}
	for _, in := range intents {
		reasons[in.Reason]++
	}
	require.Equal(t, map[ledger.Reason]int{ledger.ReasonPublished: 1, ledger.ReasonSendUnknown: 5, ledger.ReasonPlatformRejected: 2}, reasons)
	// The delayed create lands after the client gave up.
	require.Eventually(t, func() bool { return e.sim.Counts().Objects == 4 }, 20*time.Second, 20*time.Millisecond,
		"ok, drop after commit, error after commit and delay created one object each")
	for _, k := range keys {
		require.LessOrEqual(t, e.sim.Created(k.String()), 1)
		require.Equal(t, 1, e.sim.Received(k.String()))
	}
}

// Work for an intent that is no longer pending is acknowledged and ignored: no attempt, no send.
func TestWorkForAnIntentThatIsNotPendingIsIgnored(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.Submit("acct-1", "only once")
	stop := e.run(e.config())
	e.settle(keys, 10*time.Second)
	stop()
	// The same work item again, as a sweeper's republish would send it.
	e.republishWork(keys[0], "again")
	e.run(e.config())
	e.drained()
	require.Equal(t, 1, e.sim.Received(keys[0].String()))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM attempts`))
}

// While a kill switch is on, work waits and no attempt is created; when it goes off, the work
// goes through.
func TestAKillSwitchDelaysWorkWithoutOpeningAttempts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	_, err := e.Ledger.SetSwitch(e.Ctx, "acct-1", true, ledger.Actor{Name: "test", Reason: "incident"})
	require.NoError(t, err)
	keys := e.Submit("acct-1", worldtest.Texts("held", 5)...)
	e.run(e.config())
	time.Sleep(time.Second) // several gate delays
	require.Zero(t, e.Count(`SELECT count(*) FROM attempts`), "no attempt while the switch is on")
	require.Zero(t, e.sim.Counts().Requests)
	_, err = e.Ledger.SetSwitch(e.Ctx, "acct-1", false, ledger.Actor{Name: "test", Reason: "resolved"})
	require.NoError(t, err)
	intents := e.settle(keys, 10*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 5}, states(intents))
	require.Equal(t, 5, e.Count(`SELECT count(*) FROM attempts`))
}

// Two dispatchers given the same work twice (a republish racing a redelivery): one send each.
func TestTwoDispatchersOnRepeatedWorkSendOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Latency: 50 * time.Millisecond})
	keys := e.Submit("acct-1", worldtest.Texts("contended", 30)...)
	for _, k := range keys {
		e.republishWork(k, "copy")
	}
	e.run(e.config())
	e.run(e.config())
	intents := e.settle(keys, 20*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 30}, states(intents))
	for _, k := range keys {
		require.Equal(t, 1, e.sim.Received(k.String()), "one request for %s", k)
	}
	e.drained()
	require.Equal(t, 30, e.Count(`SELECT count(*) FROM attempts`))
}

// A backlog meets the rate limit before Begin: only as many sends as the bucket holds tokens
// go on, the rest wait for theirs without opening attempts, and none bounces through failed.
func TestARateLimitReleasesABacklogAtThePolicysRate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	rate, burst := 60, 3 // a token a second, three at once
	_, err := e.Ledger.SetPolicy(e.Ctx, "acct-1", ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &rate, RateBurst: &burst}}, ledger.Actor{Name: "test", Reason: "the test's rate"})
	require.NoError(t, err)
	keys := e.Submit("acct-1", worldtest.Texts("backlog", 12)...)
	cfg := e.config()
	cfg.Batch = 4 // the backlog in several batches, through the pipelines at once
	start := time.Now()
	e.run(cfg)
	var intents map[identity.DeliveryKey]ledger.Intent
	require.Eventually(t, func() bool {
		var err error
		intents, err = e.Ledger.GetMany(e.Ctx, keys)
		require.NoError(t, err)
		return states(intents)[ledger.Published] >= 3
	}, 20*time.Second, 20*time.Millisecond, "the burst goes at once")
	// An upper bound only (a slow machine publishes fewer, never more): the burst, then a
	// token a second, with one of slack.
	bound := 3 + int(time.Since(start).Seconds()) + 1
	s := states(intents)
	require.Zero(t, s[ledger.Failed], "nothing was refused at authorization: the gate held it back")
	require.LessOrEqual(t, s[ledger.Published], bound)
	intents = e.settle(keys, 30*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 12}, states(intents))
	require.Equal(t, 12, e.Count(`SELECT count(*) FROM attempts`), "one attempt each: none opened for work the rate held back")
	require.Zero(t, e.Count(`SELECT count(*) FROM history WHERE reason = 'rate_limited'`))
}

// Two dispatchers race over pairs of posts with one text, each published and then published
// again as a new occurrence: whichever dispatcher reaches a repeat first, and in whatever batch,
// the original is the one sent, and the repeat is parked naming it.
func TestTwoDispatchersSendTheOriginalOfARepeatedText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Latency: 20 * time.Millisecond})
	const pairs = 20
	var envs []identity.Envelope
	for i := 0; i < pairs; i++ {
		for _, occurrence := range []string{"", "again"} {
			env, err := identity.ParseEnvelope([]byte(fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":"said twice %d"},"occurrence":%q}`, i, occurrence)))
			require.NoError(t, err)
			envs = append(envs, env)
		}
	}
	res, err := e.Ledger.Submit(e.Ctx, envs)
	require.NoError(t, err)
	_, err = e.Relay.Drain(e.Ctx)
	require.NoError(t, err)
	var keys []identity.DeliveryKey
	for _, r := range res {
		keys = append(keys, r.Key)
	}
	cfg := e.config()
	cfg.Batch = 3 // pairs split across batches and dispatchers
	for _, instance := range []string{"a", "b"} {
		l, err := ledger.New(e.DB.AppPool(t), ledger.Config{Actor: "dispatcher/" + instance})
		require.NoError(t, err)
		d, err := dispatch.New(e.Ctx, e.JS, l, e.Relay, cfg)
		require.NoError(t, err)
		e.Run(d.Run)
	}
	intents := e.settle(keys, 20*time.Second)
	for i := 0; i < pairs; i++ {
		original, repeat := keys[2*i], keys[2*i+1]
		require.Equal(t, ledger.Published, intents[original].State, "pair %d: the original", i)
		require.Equal(t, ledger.ReasonDuplicateText, intents[repeat].Reason, "pair %d: the repeat", i)
		require.Equal(t, 1, e.sim.Received(original.String()), "pair %d", i)
		require.Zero(t, e.sim.Received(repeat.String()), "pair %d", i)
		rec, err := e.Ledger.Inspect(e.Ctx, repeat)
		require.NoError(t, err)
		hold, ok := rec.TextHold()
		require.True(t, ok, "pair %d", i)
		require.Equal(t, original, hold.Holder, "pair %d", i)
	}
}
