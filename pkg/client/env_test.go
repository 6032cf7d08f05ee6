package client_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/outcome"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/ledger"
)

// env is a producer's world: a ledger with accounts acct-1 and acct-2, JetStream with atmost's
// streams, an ingester the test runs batch by batch, and a client on a connection of its own,
// as a producer's process has.
type env struct {
	*worldtest.World
	nc *nats.Conn
	c  *client.Client
	in *ingest.Ingester
}

func newEnv(t *testing.T, cfg client.Config) *env {
	t.Helper()
	w := worldtest.New(t)
	for _, a := range []string{"acct-1", "acct-2"} {
		require.NoError(t, w.Ledger.AddAccount(w.Ctx, ledger.Account{ID: a, Platform: "sim", Settings: json.RawMessage(`{}`)}, ledger.Actor{Name: "test", Reason: "a test account"}))
	}
	in, err := ingest.New(w.Ctx, w.JS, w.Ledger, ingest.Config{MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	e := &env{World: w, nc: connect(t, w.NATSURL), in: in}
	e.c, err = client.New(e.nc, cfg)
	require.NoError(t, err)
	return e
}

func connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// ingest runs ingest batches until one finds nothing, then publishes the transitions, as the
// role does; it returns what the batches did.
func (e *env) ingest() ingest.Stats {
	e.T.Helper()
	var total ingest.Stats
	for range 50 {
		s, err := e.in.Batch(e.Ctx)
		require.NoError(e.T, err)
		if s == (ingest.Stats{}) {
			_, err := e.Relay.Drain(e.Ctx)
			require.NoError(e.T, err)
			return total
		}
		total.Created += s.Created
		total.Duplicates += s.Duplicates
		total.Rejected += s.Rejected
	}
	e.T.Fatal("the stream never ran dry")
	return total
}

// serveStatus serves the outcome service on a connection of its own until the test ends.
func (e *env) serveStatus() {
	e.T.Helper()
	svc, err := outcome.Start(connect(e.T, e.NATSURL), e.Ledger, outcome.Config{})
	require.NoError(e.T, err)
	e.T.Cleanup(svc.Stop)
}

func post(account, text string) client.Intent {
	return client.Intent{Account: account, Action: "post", Request: map[string]any{"text": text}}
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
