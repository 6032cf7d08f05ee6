package sweep_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/dbtest"
	"github.com/atmost/atmost/internal/natstest"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/sweep"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// env is a sweeper's world: a migrated ledger with accounts acct-1 and acct-2 (no rate limit,
// no backoff unless a test sets them) and an embedded JetStream with atmost's streams.
type env struct {
	t       *testing.T
	ctx     context.Context
	db      *dbtest.DB
	ledger  *ledger.Ledger
	js      jetstream.JetStream
	relay   *relay.Relay
	natsURL string
}

func newEnv(t *testing.T) *env {
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
	e := &env{t: t, ctx: ctx, db: db, ledger: l, js: js, relay: relay.New(l, js, relay.Config{}), natsURL: srv.URL}
	for _, a := range []string{"acct-1", "acct-2"} {
		require.NoError(t, l.AddAccount(ctx, ledger.Account{ID: a, Platform: "sim", Settings: json.RawMessage(`{"url":"http://127.0.0.1:9"}`)}))
	}
	e.exec(`UPDATE policies SET rate_per_minute = 0, backoff_base_ms = 0 WHERE scope = ''`)
	return e
}

// sweeper is one sweeper process's Sweeper, with its own ledger actor.
func (e *env) sweeper(name string, cfg sweep.Config) *sweep.Sweeper {
	e.t.Helper()
	l, err := ledger.New(e.db.AppPool(e.t), ledger.Config{Actor: name})
	require.NoError(e.t, err)
	s, err := sweep.New(l, relay.New(l, e.js, relay.Config{}), e.js, cfg)
	require.NoError(e.t, err)
	return s
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

// submit stores post intents for account and publishes their transitions, as ingest does.
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
	for i, r := range results {
		require.Equal(e.t, ledger.Created, r.Outcome)
		keys[i] = r.Key
	}
	_, err = e.relay.Drain(e.ctx)
	require.NoError(e.t, err)
	return keys
}

func texts(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s %d", prefix, i)
	}
	return out
}

func hash(s string) [32]byte {
	var h [32]byte
	copy(h[:], s)
	return h
}

// claimed begins an attempt on each key; authorized also authorizes it.
func (e *env) claimed(keys []identity.DeliveryKey) []ledger.Claim {
	e.t.Helper()
	var out []ledger.Claim
	for _, k := range keys {
		c, err := e.ledger.Begin(e.ctx, k, hash(k.String()), ledger.MinLease)
		require.NoError(e.t, err)
		out = append(out, c)
	}
	return out
}

func (e *env) authorized(keys []identity.DeliveryKey) []ledger.Claim {
	e.t.Helper()
	claims := e.claimed(keys)
	for _, c := range claims {
		a, err := e.ledger.Authorize(e.ctx, c, ledger.MinLease, "sim/v1")
		require.NoError(e.t, err)
		require.Equal(e.t, ledger.Authorized, a.State, "reason %s", a.Reason)
	}
	return claims
}

// failed authorizes each key and completes it as not sent for connection_failed.
func (e *env) failed(keys []identity.DeliveryKey) {
	e.t.Helper()
	for _, c := range e.authorized(keys) {
		_, err := e.ledger.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
		require.NoError(e.t, err)
	}
}

// expire moves the leases of keys into the past, as if their workers had stalled.
func (e *env) expire(keys []identity.DeliveryKey) {
	e.t.Helper()
	for _, k := range keys {
		e.exec(`UPDATE intents SET lease_expires_at = now() - INTERVAL '1 second' WHERE delivery_key = $1`, k.Bytes())
	}
}

// age moves the last transition of keys d into the past.
func (e *env) age(keys []identity.DeliveryKey, d time.Duration) {
	e.t.Helper()
	for _, k := range keys {
		e.exec(`UPDATE intents SET updated_at = now() - $2::BIGINT * INTERVAL '1 millisecond' WHERE delivery_key = $1`, k.Bytes(), d.Milliseconds())
	}
}

func (e *env) intent(k identity.DeliveryKey) ledger.Intent {
	e.t.Helper()
	in, err := e.ledger.Get(e.ctx, k)
	require.NoError(e.t, err)
	return in
}

// streamCount is how many messages a stream holds on subjects matching filter.
func (e *env) streamCount(stream, filter string) int {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, stream)
	require.NoError(e.t, err)
	info, err := s.Info(e.ctx, jetstream.WithSubjectFilter(filter))
	require.NoError(e.t, err)
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

// purgeWork empties ATMOST_DISPATCH: every work item is lost.
func (e *env) purgeWork() {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, events.DispatchStream)
	require.NoError(e.t, err)
	require.NoError(e.t, s.Purge(e.ctx))
}

// eventsMatchHistory asserts every history row is on ATMOST_EVENTS exactly once and the
// outbox is empty.
func (e *env) eventsMatchHistory() {
	e.t.Helper()
	require.Zero(e.t, e.count(`SELECT count(*) FROM outbox`), "every transition was published")
	s, err := e.js.Stream(e.ctx, events.EventsStream)
	require.NoError(e.t, err)
	info, err := s.Info(e.ctx)
	require.NoError(e.t, err)
	require.Equal(e.t, uint64(e.count(`SELECT count(*) FROM history`)), info.State.Msgs, "one event per history row")
}
