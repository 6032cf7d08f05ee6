package sweep_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// env is a sweeper's world: a migrated ledger with accounts acct-1 and acct-2 (no rate limit,
// no backoff unless a test sets them) and an embedded JetStream with atmost's streams.
type env struct{ *worldtest.World }

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{worldtest.New(t)}
	for _, a := range []string{"acct-1", "acct-2"} {
		require.NoError(t, e.Ledger.AddAccount(e.Ctx, ledger.Account{ID: a, Platform: "sim", Settings: json.RawMessage(`{"url":"http://127.0.0.1:9"}`)}, ledger.Actor{Name: "test", Reason: "a test account"}))
	}
	e.Exec(`UPDATE policies SET rate_per_minute = 0, backoff_base_ms = 0 WHERE scope = ''`)
	return e
}

// sweeper is one sweeper process's Sweeper, with its own ledger actor.
func (e *env) sweeper(name string, cfg sweep.Config) *sweep.Sweeper {
	e.T.Helper()
	l, err := ledger.New(e.DB.AppPool(e.T), ledger.Config{Actor: name})
	require.NoError(e.T, err)
	s, err := sweep.New(l, relay.New(l, e.JS, relay.Config{Settle: -1}), e.JS, cfg)
	require.NoError(e.T, err)
	return s
}

func hash(s string) [32]byte {
	var h [32]byte
	copy(h[:], s)
	return h
}

// claimed begins an attempt on each key; authorized also authorizes it.
func (e *env) claimed(keys []identity.DeliveryKey) []ledger.Claim {
	e.T.Helper()
	var out []ledger.Claim
	for _, k := range keys {
		c, err := e.Ledger.Begin(e.Ctx, k, hash(k.String()), ledger.MinLease)
		require.NoError(e.T, err)
		out = append(out, c)
	}
	return out
}

func (e *env) authorized(keys []identity.DeliveryKey) []ledger.Claim {
	e.T.Helper()
	claims := e.claimed(keys)
	for _, c := range claims {
		a, err := e.Ledger.Authorize(e.Ctx, c, ledger.MinLease, "sim/v1")
		require.NoError(e.T, err)
		require.Equal(e.T, ledger.Authorized, a.State, "reason %s", a.Reason)
	}
	return claims
}

// failed authorizes each key and completes it as not sent for connection_failed.
func (e *env) failed(keys []identity.DeliveryKey) {
	e.T.Helper()
	for _, c := range e.authorized(keys) {
		_, err := e.Ledger.Complete(e.Ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
		require.NoError(e.T, err)
	}
}

// expire moves the leases of keys into the past, as if their workers had stalled.
func (e *env) expire(keys []identity.DeliveryKey) {
	e.T.Helper()
	for _, k := range keys {
		e.Exec(`UPDATE intents SET lease_expires_at = now() - INTERVAL '1 second' WHERE delivery_key = $1`, k.Bytes())
	}
}

// age moves the last transition of keys d into the past.
func (e *env) age(keys []identity.DeliveryKey, d time.Duration) {
	e.T.Helper()
	for _, k := range keys {
		e.Exec(`UPDATE intents SET updated_at = now() - $2::BIGINT * INTERVAL '1 millisecond' WHERE delivery_key = $1`, k.Bytes(), d.Milliseconds())
	}
}

// streamCount is how many messages a stream holds on subjects matching filter.
func (e *env) streamCount(stream, filter string) int {
	e.T.Helper()
	s, err := e.JS.Stream(e.Ctx, stream)
	require.NoError(e.T, err)
	info, err := s.Info(e.Ctx, jetstream.WithSubjectFilter(filter))
	require.NoError(e.T, err)
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n
}

// purgeWork empties ATMOST_DISPATCH: every work item is lost.
func (e *env) purgeWork() {
	e.T.Helper()
	s, err := e.JS.Stream(e.Ctx, events.DispatchStream)
	require.NoError(e.T, err)
	require.NoError(e.T, s.Purge(e.Ctx))
}
