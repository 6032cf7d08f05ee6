package reconcile_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// env is a reconciler's world: a migrated ledger, an embedded JetStream with atmost's
// streams, and the platform simulator with its fault plan, one account "acct-1" on it with a
// short reconcile delay and no rate limit.
type env struct {
	*worldtest.World
	sim    *platformsim.Server
	simURL string
}

const reconcileDelay = 300 * time.Millisecond

func newEnv(t *testing.T, simCfg platformsim.Config) *env {
	t.Helper()
	e := &env{World: worldtest.New(t)}
	e.sim, e.simURL = e.Simulator(simCfg)
	settings, err := json.Marshal(map[string]any{"url": e.simURL, "status_lookup": simCfg.StatusLookup, "reconcile_delay": reconcileDelay.String()})
	require.NoError(t, err)
	require.NoError(t, e.Ledger.AddAccount(e.Ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: settings}, ledger.Actor{Name: "test", Reason: "a test account"}))
	e.Exec(`UPDATE policies SET rate_per_minute = 0 WHERE scope = ''`)
	return e
}

// submit stores post intents for acct-1 and relays their work, as ingest does.
func (e *env) submit(texts ...string) []identity.DeliveryKey {
	e.T.Helper()
	return e.Submit("acct-1", texts...)
}

// dispatched submits one intent per text for acct-1 and dispatches them: the simulator's plan
// decides their outcomes.
func (e *env) dispatched(texts ...string) []identity.DeliveryKey {
	e.T.Helper()
	return e.dispatch(e.submit(texts...))
}

// dispatch runs a dispatcher until none of keys is pending or authorized, and returns keys.
func (e *env) dispatch(keys []identity.DeliveryKey) []identity.DeliveryKey {
	e.T.Helper()
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, dispatch.Config{
		Platforms: platform.Registry{sim.Name: sim.Open}, Batch: 16, Concurrency: 32,
		ClaimLease: ledger.MinLease, InFlightLease: ledger.MinLease, SendTimeout: time.Second,
		ReadBackTimeout: 500 * time.Millisecond, Margin: time.Second, GateDelay: 200 * time.Millisecond, AckWait: 2 * time.Second,
	})
	require.NoError(e.T, err)
	stop := e.Run(d.Run)
	e.Settle(keys, 30*time.Second, func(s ledger.State) bool { return s == ledger.Pending || s == ledger.Authorized })
	stop()
	return keys
}

func (e *env) config() reconcile.Config {
	return reconcile.Config{
		Platforms:       platform.Registry{sim.Name: sim.Open},
		Concurrency:     8,
		LookupTimeout:   2 * time.Second,
		ReadBackTimeout: time.Second,
		ScanInterval:    time.Hour, // the event path alone; the scan's tests set theirs
		RetryDelay:      200 * time.Millisecond,
		AckWait:         2 * time.Second,
	}
}

// run starts a reconciler (its own ledger actor) until the test ends or stop is called.
func (e *env) run(name string, cfg reconcile.Config) (stop func()) {
	e.T.Helper()
	l, err := ledger.New(e.DB.AppPool(e.T), ledger.Config{Actor: name})
	require.NoError(e.T, err)
	r, err := reconcile.New(e.Ctx, e.JS, l, relay.New(l, e.JS, relay.Config{}), cfg)
	require.NoError(e.T, err)
	return e.Run(r.Run)
}

// settle waits until none of keys is indeterminate and returns their intents.
func (e *env) settle(keys []identity.DeliveryKey, within time.Duration) map[identity.DeliveryKey]ledger.Intent {
	e.T.Helper()
	return e.Settle(keys, within, func(s ledger.State) bool { return s == ledger.Indeterminate })
}

// eventsMatchHistory waits for the relays to empty the outbox, then requires every history row
// on ATMOST_EVENTS exactly once.
func (e *env) eventsMatchHistory() {
	e.T.Helper()
	require.Eventually(e.T, func() bool { return e.Count(`SELECT count(*) FROM outbox`) == 0 }, 10*time.Second, 20*time.Millisecond)
	e.EventsMatchHistory()
}
