package dispatch_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
)

// A claim the account's health holds at Authorize (it tripped between Begin and Authorize) ends
// with nothing sent and no attempt spent, and its work item is given back to JetStream, not
// acknowledged: with no sweeper to publish it again, the intents are sent once the account,
// resumed before the work comes back (GateDelay), serves again. Acknowledged, an intent would
// wait pending with no work item until a sweeper's pass.
func TestAClaimHeldAtAuthorizeWaitsForItsAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	var once sync.Once
	cfg := dispatch.WithHook(e.config(), func(step string) {
		if step != "after-begin" {
			return
		}
		once.Do(func() {
			// The account trips between Begin and Authorize.
			_, err := e.DB.Pool.Exec(e.Ctx, `INSERT INTO account_health (account_id, state, cause, next_probe_at) VALUES ('acct-1', 'holding', 'platform_unavailable', now() + INTERVAL '1 hour')`)
			if err != nil {
				panic(err)
			}
		})
	})
	cfg.GateDelay = 3 * time.Second   // the held work's wait: the account is resumed within it
	cfg = dispatch.WithoutTrials(cfg) // the three claims are one batch, not a cold account's trial first
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, cfg)
	require.NoError(t, err)
	e.Run(d.Run)

	keys := e.Submit("acct-1", worldtest.Texts("held at authorize", 3)...)
	require.Eventually(t, func() bool { return dispatch.WorkCount(d, "held") >= float64(len(keys)) }, 20*time.Second, 10*time.Millisecond)
	_, err = e.Ledger.ResumeAccount(e.Ctx, "acct-1", ledger.Actor{Name: "alice", Reason: "the platform is back"})
	require.NoError(t, err)
	intents := e.settle(keys, 20*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: len(keys)}, states(intents), "the held work came back")
	require.GreaterOrEqual(t, dispatch.WorkCount(d, "held"), float64(len(keys)), "every claim was held once")
	for _, k := range keys {
		require.Equal(t, 1, e.Intent(k).AttemptsAuthorized, "a held claim spends no attempt")
		require.Equal(t, 1, e.sim.Created(k.String()))
	}
	require.Equal(t, ledger.Serving, e.healthOf("acct-1").State)
}

// The dispatcher's own not-sent (here: a send it refused to start, its deadline margin passed
// before the first byte) says nothing of the platform: however many there are, the account
// never trips nor counts a failure, and the intents are sent on their retry.
func TestTheDispatchersOwnNotSentNeverTripsTheAccount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	e.Exec(`UPDATE policies SET trip_failures = 2, backoff_base_ms = 100 WHERE scope = ''`)
	var mu sync.Mutex
	late := 0
	cfg := e.config()
	cfg.Batch = 4
	cfg = dispatch.WithHook(cfg, func(step string) {
		if step != "before-send" {
			return
		}
		mu.Lock()
		late++
		first := late <= 4
		mu.Unlock()
		if first {
			// Past the send's deadline (the in-flight lease less the margin): refused to start.
			time.Sleep(ledger.MinLease - cfg.Margin + 100*time.Millisecond)
		}
	})
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, cfg)
	require.NoError(t, err)
	e.Run(d.Run)
	e.retrying(100 * time.Millisecond)

	keys := e.Submit("acct-1", worldtest.Texts("refused to start", 4)...)
	intents := e.Settle(keys, 30*time.Second, func(s ledger.State) bool { return s != ledger.Published && s != ledger.Parked })
	require.Equal(t, map[ledger.State]int{ledger.Published: len(keys)}, states(intents))
	require.Equal(t, 4, e.Count(`SELECT count(*) FROM history WHERE to_state = 'failed' AND reason = 'connection_failed'`), "four refused to start")
	h := e.healthOf("acct-1")
	require.Equal(t, ledger.Serving, h.State)
	require.Zero(t, h.Failures)
	require.Zero(t, e.Count(`SELECT count(*) FROM control_history WHERE kind = 'health'`), "never tripped")
}
