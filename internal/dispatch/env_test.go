package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/dbtest"
	"github.com/atmost/atmost/internal/dispatch"
	"github.com/atmost/atmost/internal/natstest"
	"github.com/atmost/atmost/internal/platformsim"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// env is one dispatcher's world: a migrated ledger, an embedded JetStream with atmost's
// streams, and the platform simulator, with one account "acct-1" on it and no rate limit.
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
	e.addAccount("acct-1", fmt.Sprintf(`{"url":%q}`, simURL))
	return e
}

func (e *env) addAccount(id, settings string) {
	e.t.Helper()
	require.NoError(e.t, e.ledger.AddAccount(e.ctx, ledger.Account{ID: id, Platform: sim.Name, Settings: json.RawMessage(settings)}))
	unlimited := 0
	_, err := e.ledger.SetPolicy(e.ctx, id, ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, "test", "tests not about the rate limit")
	require.NoError(e.t, err)
}

// submit stores intents and relays their work items, as ingest does.
func (e *env) submit(account string, texts ...string) []identity.DeliveryKey {
	e.t.Helper()
	var envs []identity.Envelope
	for _, text := range texts {
		env, err := identity.ParseEnvelope([]byte(fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":%q}}`, account, text)))
		require.NoError(e.t, err)
		envs = append(envs, env)
	}
	results, err := e.ledger.Submit(e.ctx, envs)
	require.NoError(e.t, err)
	keys := make([]identity.DeliveryKey, len(results))
	for i, env := range envs {
		keys[i] = env.DeliveryKey()
		require.Equal(e.t, ledger.Created, results[i].Outcome)
	}
	_, err = e.relay.Drain(e.ctx)
	require.NoError(e.t, err)
	return keys
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
	e.t.Helper()
	d, err := dispatch.New(e.ctx, e.js, e.ledger, e.relay, cfg)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
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

// settle waits until none of keys is pending or authorized, and returns their states.
func (e *env) settle(keys []identity.DeliveryKey, within time.Duration) map[identity.DeliveryKey]ledger.Intent {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		intents, err := e.ledger.GetMany(e.ctx, keys)
		require.NoError(e.t, err)
		busy := 0
		for _, in := range intents {
			if in.State == ledger.Pending || in.State == ledger.Authorized {
				busy++
			}
		}
		if busy == 0 {
			return intents
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d of %d intents still pending or authorized after %s", busy, len(keys), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.db.Pool.QueryRow(e.ctx, sql, args...).Scan(&n))
	return n
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
	e.t.Helper()
	w := events.WorkItem{V: events.Version, DeliveryKey: key, Account: "acct-1", Event: events.NewID(key, 1)}
	data, err := json.Marshal(w)
	require.NoError(e.t, err)
	_, err = e.js.PublishMsg(e.ctx, &nats.Msg{Subject: w.Subject(), Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{w.MsgID() + ":" + tag}}})
	require.NoError(e.t, err)
}

// drained waits until the dispatcher consumer has nothing pending and nothing unacknowledged.
func (e *env) drained() {
	e.t.Helper()
	c, err := e.js.Consumer(e.ctx, events.DispatchStream, "dispatcher")
	require.NoError(e.t, err)
	require.Eventually(e.t, func() bool {
		info, err := c.Info(e.ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, 15*time.Second, 20*time.Millisecond, "the work queue never drained")
}
