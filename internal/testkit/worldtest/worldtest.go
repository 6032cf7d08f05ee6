// Package worldtest builds the world the tests of atmost's roles run in: a migrated ledger of
// their own (dbtest), an embedded JetStream with atmost's streams (natstest), a relay between
// them, and when a test asks for it the platform simulator. The dispatcher's, the sweeper's and
// the reconciler's tests each add what is theirs on top.
package worldtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// World is one test's ledger and broker. Everything in it ends with the test.
type World struct {
	T   testing.TB
	Ctx context.Context
	DB  *dbtest.DB
	// Ledger writes as actor "test".
	Ledger  *ledger.Ledger
	JS      jetstream.JetStream
	Relay   *relay.Relay
	NATSURL string
}

// New returns a world with no accounts in its ledger.
func New(t testing.TB) *World {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := dbtest.New(t)
	l, err := ledger.New(db.AppPool(t), ledger.Config{Actor: "test"})
	require.NoError(t, err)
	srv := natstest.New(t)
	js := srv.Streams(t)
	return &World{T: t, Ctx: ctx, DB: db, Ledger: l, JS: js, Relay: newRelay(l, js), NATSURL: srv.URL}
}

// Simulator serves the platform simulator until the test ends and returns it with its URL.
func (w *World) Simulator(cfg platformsim.Config) (*platformsim.Server, string) {
	w.T.Helper()
	s, err := platformsim.New(cfg)
	require.NoError(w.T, err)
	url, _, err := s.Serve(w.Ctx, "127.0.0.1:0")
	require.NoError(w.T, err)
	return s, url
}

// Exec runs a statement as the database's owner.
func (w *World) Exec(sql string, args ...any) {
	w.T.Helper()
	_, err := w.DB.Pool.Exec(w.Ctx, sql, args...)
	require.NoError(w.T, err, sql)
}

// Count runs a query that returns one number, as the database's owner.
func (w *World) Count(sql string, args ...any) int {
	w.T.Helper()
	var n int
	require.NoError(w.T, w.DB.Pool.QueryRow(w.Ctx, sql, args...).Scan(&n), sql)
	return n
}

// Submit stores one post intent per text for account, requires each to be new, and publishes
// their transitions (the work items among them), as ingest does.
func (w *World) Submit(account string, texts ...string) []identity.DeliveryKey {
	w.T.Helper()
	var envs []identity.Envelope
	for _, text := range texts {
		env, err := identity.ParseEnvelope([]byte(fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":%q}}`, account, text)))
		require.NoError(w.T, err)
		envs = append(envs, env)
	}
	results, err := w.Ledger.Submit(w.Ctx, envs)
	require.NoError(w.T, err)
	keys := make([]identity.DeliveryKey, len(results))
	for i, r := range results {
		require.Equal(w.T, ledger.Created, r.Outcome)
		require.Equal(w.T, envs[i].DeliveryKey(), r.Key)
		keys[i] = r.Key
	}
	_, err = w.Relay.Drain(w.Ctx)
	require.NoError(w.T, err)
	return keys
}

// Texts returns n distinct texts that start with prefix.
func Texts(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s %d", prefix, i)
	}
	return out
}

// Intent reads one intent.
func (w *World) Intent(k identity.DeliveryKey) ledger.Intent {
	w.T.Helper()
	in, err := w.Ledger.Get(w.Ctx, k)
	require.NoError(w.T, err)
	return in
}

// Settle waits until none of keys is in a state for which moving is true, and returns the
// intents; the test fails after within.
func (w *World) Settle(keys []identity.DeliveryKey, within time.Duration, moving func(ledger.State) bool) map[identity.DeliveryKey]ledger.Intent {
	w.T.Helper()
	deadline := time.Now().Add(within)
	for {
		intents, err := w.Ledger.GetMany(w.Ctx, keys)
		require.NoError(w.T, err)
		busy := 0
		for _, in := range intents {
			if moving(in.State) {
				busy++
			}
		}
		if busy == 0 {
			return intents
		}
		if time.Now().After(deadline) {
			w.T.Fatalf("%d of %d intents still moving after %s", busy, len(keys), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// EventsMatchHistory requires an empty outbox and every history row on ATMOST_EVENTS exactly
// once (one message per row; the stream deduplicates by event id).
func (w *World) EventsMatchHistory() {
	w.T.Helper()
	require.Zero(w.T, w.Count(`SELECT count(*) FROM outbox`), "every transition was published")
	s, err := w.JS.Stream(w.Ctx, events.EventsStream)
	require.NoError(w.T, err)
	info, err := s.Info(w.Ctx)
	require.NoError(w.T, err)
	require.Equal(w.T, uint64(w.Count(`SELECT count(*) FROM history`)), info.State.Msgs, "one event per history row")
}

// Run runs a role's loop until the test ends or stop is called; stop waits for run to return
// and requires it to have returned nil.
func (w *World) Run(run func(ctx context.Context) error) (stop func()) {
	w.T.Helper()
	ctx, cancel := context.WithCancel(w.Ctx)
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(w.T, <-done)
	}
	w.T.Cleanup(stop)
	return stop
}

// Sweeper runs a sweeper, writing as its own ledger actor, with a pass every interval until the
// test ends, as a deployment runs one beside its dispatchers and reconcilers: it heals an account
// held for unknown outcomes once the lookups have caught up (nothing else does), and publishes
// stranded work again.
func (w *World) Sweeper(interval time.Duration) {
	w.T.Helper()
	l, err := ledger.New(w.DB.AppPool(w.T), ledger.Config{Actor: "sweeper"})
	require.NoError(w.T, err)
	s, err := sweep.New(l, newRelay(l, w.JS), w.JS, sweep.Config{Interval: interval})
	require.NoError(w.T, err)
	w.Run(s.Run)
}

// newRelay is the world's relay. Its slow path takes every row at once (Settle -1): a test
// writes through the ledger itself, and no writer publishes what it wrote.
func newRelay(l *ledger.Ledger, js jetstream.JetStream) *relay.Relay {
	return relay.New(l, js, relay.Config{Settle: -1})
}
