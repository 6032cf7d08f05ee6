package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/dbtest"
	"github.com/atmost/atmost/internal/dispatch"
	"github.com/atmost/atmost/internal/natstest"
	"github.com/atmost/atmost/internal/platformsim"
	"github.com/atmost/atmost/internal/reconcile"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// env is a reconciler's world: a migrated ledger, an embedded JetStream with atmost's
// streams, and the platform simulator with its fault plan, one account "acct-1" on it with a
// short reconcile delay and no rate limit.
type env struct {
	t       *testing.T
	ctx     context.Context
	db      *dbtest.DB
	ledger  *ledger.Ledger
	js      jetstream.JetStream
	relay   *relay.Relay
	natsURL string
	sim     *platformsim.Server
	simURL  string
}

const reconcileDelay = 300 * time.Millisecond

func newEnv(t *testing.T, simCfg platformsim.Config) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := dbtest.New(t)
	l, err := ledger.New(db.AppPool(t), ledger.Config{Actor: "test"})
	require.NoError(t, err)
	srv := natstest.New(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, streams.Ensure(ctx, nc, js, streams.Config{}))
	s, err := platformsim.New(simCfg)
	require.NoError(t, err)
	simURL, _, err := s.Serve(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	e := &env{t: t, ctx: ctx, db: db, ledger: l, js: js, relay: relay.New(l, js, relay.Config{}), natsURL: srv.URL, sim: s, simURL: simURL}
	settings, err := json.Marshal(map[string]any{"url": simURL, "status_lookup": simCfg.StatusLookup, "reconcile_delay": reconcileDelay.String()})
	require.NoError(t, err)
	require.NoError(t, l.AddAccount(ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: settings}))
	e.exec(`UPDATE policies SET rate_per_minute = 0 WHERE scope = ''`)
	return e
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	_, err := e.db.Pool.Exec(e.ctx, sql, args...)
	require.NoError(e.t, err, sql)
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.Pool.QueryRow(e.ctx, sql, args...).Scan(&n), sql)
	return n
}

func texts(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s %d", prefix, i)
	}
	return out
}

// submit stores post intents and relays their work, as ingest does.
func (e *env) submit(texts ...string) []identity.DeliveryKey {
	e.t.Helper()
	var envs []identity.Envelope
	for _, text := range texts {
		env, err := identity.ParseEnvelope([]byte(fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":%q}}`, text)))
		require.NoError(e.t, err)
		envs = append(envs, env)
	}
	results, err := e.ledger.Submit(e.ctx, envs)
	require.NoError(e.t, err)
	keys := make([]identity.DeliveryKey, len(results))
	for i, r := range results {
		require.Equal(e.t, ledger.Created, r.Outcome)
		keys[i] = r.Key
	}
	_, err = e.relay.Drain(e.ctx)
	require.NoError(e.t, err)
	return keys
}

// dispatched submits one intent per text and runs a dispatcher until none is pending or
// authorized: the simulator's plan decides their outcomes.
func (e *env) dispatched(texts ...string) []identity.DeliveryKey {
	e.t.Helper()
	keys := e.submit(texts...)
	d, err := dispatch.New(e.ctx, e.js, e.ledger, e.relay, dispatch.Config{
		Platforms: platform.Registry{sim.Name: sim.Open}, Batch: 16, Concurrency: 32,
		ClaimLease: ledger.MinLease, InFlightLease: ledger.MinLease, SendTimeout: time.Second,
		ReadBackTimeout: 500 * time.Millisecond, Margin: time.Second, GateDelay: 200 * time.Millisecond, AckWait: 2 * time.Second,
	})
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	require.Eventually(e.t, func() bool {
		intents, err := e.ledger.GetMany(e.ctx, keys)
		require.NoError(e.t, err)
		for _, in := range intents {
			if in.State == ledger.Pending || in.State == ledger.Authorized {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond)
	cancel()
	require.NoError(e.t, <-done)
	return keys
}

func (e *env) config() reconcile.Config {
	return reconcile.Config{
		Platforms:       platform.Registry{sim.Name: sim.Open},
		Concurrency:     8,
		LookupTimeout:   2 * time.Second,
		ReadBackTimeout: time.Second,
		ScanInterval:    200 * time.Millisecond,
		RetryDelay:      200 * time.Millisecond,
		AckWait:         2 * time.Second,
	}
}

// run starts a reconciler (its own ledger actor) until the test ends or stop is called.
func (e *env) run(name string, cfg reconcile.Config) (stop func()) {
	e.t.Helper()
	l, err := ledger.New(e.db.AppPool(e.t), ledger.Config{Actor: name})
	require.NoError(e.t, err)
	r, err := reconcile.New(e.ctx, e.js, l, relay.New(l, e.js, relay.Config{}), cfg)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(e.t, <-done)
	}
	e.t.Cleanup(stop)
	return stop
}

// settle waits until none of keys is indeterminate and returns their intents.
func (e *env) settle(keys []identity.DeliveryKey, within time.Duration) map[identity.DeliveryKey]ledger.Intent {
	e.t.Helper()
	var intents map[identity.DeliveryKey]ledger.Intent
	require.Eventually(e.t, func() bool {
		var err error
		intents, err = e.ledger.GetMany(e.ctx, keys)
		require.NoError(e.t, err)
		for _, in := range intents {
			if in.State == ledger.Indeterminate {
				return false
			}
		}
		return true
	}, within, 20*time.Millisecond, "intents still indeterminate")
	return intents
}

func (e *env) intent(k identity.DeliveryKey) ledger.Intent {
	e.t.Helper()
	in, err := e.ledger.Get(e.ctx, k)
	require.NoError(e.t, err)
	return in
}

// eventsMatchHistory asserts every history row reached ATMOST_EVENTS exactly once.
func (e *env) eventsMatchHistory() {
	e.t.Helper()
	require.Eventually(e.t, func() bool { return e.count(`SELECT count(*) FROM outbox`) == 0 }, 10*time.Second, 20*time.Millisecond)
	s, err := e.js.Stream(e.ctx, events.EventsStream)
	require.NoError(e.t, err)
	info, err := s.Info(e.ctx)
	require.NoError(e.t, err)
	require.Equal(e.t, uint64(e.count(`SELECT count(*) FROM history`)), info.State.Msgs, "one event per history row")
}
