package dispatch_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// env is one dispatcher's world: a migrated ledger, an embedded JetStream with atmost's
// streams, and the platform simulator, with one account "acct-1" on it and no rate limit.
type env struct {
	*worldtest.World
	sim    *platformsim.Server
	simURL string
}

func newEnv(t *testing.T, simCfg platformsim.Config) *env {
	t.Helper()
	e := &env{World: worldtest.New(t)}
	e.sim, e.simURL = e.Simulator(simCfg)
	e.addAccount("acct-1", fmt.Sprintf(`{"url":%q}`, e.simURL))
	// The faults these tests inject are not a reason for the account to hold; the tests of
	// account health set their own thresholds.
	e.Exec(`UPDATE policies SET trip_failures = 1000000, trip_unknowns = 1000000 WHERE scope = ''`)
	return e
}

func (e *env) addAccount(id, settings string) {
	e.T.Helper()
	require.NoError(e.T, e.Ledger.AddAccount(e.Ctx, ledger.Account{ID: id, Platform: sim.Name, Settings: json.RawMessage(settings)}, ledger.Actor{Name: "test", Reason: "a test account"}))
	unlimited := 0
	_, err := e.Ledger.SetPolicy(e.Ctx, id, ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "test", Reason: "tests not about the rate limit"})
	require.NoError(e.T, err)
}

func (e *env) config() dispatch.Config {
	return dispatch.Config{
		Platforms:       platform.Registry{sim.Name: sim.Open},
		Batch:           16,
		Concurrency:     32,
		ClaimLease:      ledger.MinLease,
		InFlightLease:   ledger.MinLease,
		SendTimeout:     2 * time.Second,
		ReadBackTimeout: time.Second,
		Margin:          time.Second,
		GateDelay:       200 * time.Millisecond,
		AckWait:         2 * time.Second,
	}
}

// run starts a dispatcher that runs until the test ends (or stop is called) and returns stop,
// which waits for Run to return.
func (e *env) run(cfg dispatch.Config) (stop func()) {
	e.T.Helper()
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, cfg)
	require.NoError(e.T, err)
	return e.Run(d.Run)
}

// settle waits until none of keys is pending or authorized, and returns their states.
func (e *env) settle(keys []identity.DeliveryKey, within time.Duration) map[identity.DeliveryKey]ledger.Intent {
	e.T.Helper()
	return e.Settle(keys, within, func(s ledger.State) bool { return s == ledger.Pending || s == ledger.Authorized })
}

func states(intents map[identity.DeliveryKey]ledger.Intent) map[ledger.State]int {
	out := map[ledger.State]int{}
	for _, in := range intents {
		out[in.State]++
	}
	return out
}

// republishWork publishes the intent's work item again under another message id, as a
// sweeper's republish of stranded work would.
func (e *env) republishWork(key identity.DeliveryKey, tag string) {
	e.T.Helper()
	w := events.WorkItem{V: events.Version, DeliveryKey: key, Account: "acct-1", Event: events.NewID(key, 1)}
	data, err := json.Marshal(w)
	require.NoError(e.T, err)
	_, err = e.JS.PublishMsg(e.Ctx, &nats.Msg{Subject: w.Subject(), Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{w.MsgID() + ":" + tag}}})
	require.NoError(e.T, err)
}

// drained waits until the dispatcher consumer has nothing pending and nothing unacknowledged.
func (e *env) drained() {
	e.T.Helper()
	c, err := e.JS.Consumer(e.Ctx, events.DispatchStream, "dispatcher")
	require.NoError(e.T, err)
	require.Eventually(e.T, func() bool {
		info, err := c.Info(e.Ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, 15*time.Second, 20*time.Millisecond, "the work queue never drained")
}

// sweeping runs a sweeper every interval until the test ends, as the sweeper role would: it
// publishes again the work the dispatcher acknowledged while an account held, once the
// account may go on.
func (e *env) sweeping(interval time.Duration) {
	e.T.Helper()
	s, err := sweep.New(e.Ledger, e.Relay, e.JS, sweep.Config{Interval: interval, NoDrain: true})
	require.NoError(e.T, err)
	e.Run(s.Run)
}
