package sweep_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/sweep"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestSweeperRoleRefusesABadCommandLine(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{{"--batch", "0"}, {"--interval", "0s"}, {"--stranded-after", "-1s"}, {"--lookup-stale", "0s"},
		{"--unreconciled-after", "0s"}, {"--isolation", "snapshot"}, {"extra"}, {"--nope"}} {
		var stderr bytes.Buffer
		require.Equal(t, 2, sweep.Main(context.Background(), args, none, &stderr), "%v", args)
		require.NotEmpty(t, stderr.String())
	}
	var stderr bytes.Buffer
	require.Equal(t, 0, sweep.Main(context.Background(), []string{"--help"}, none, &stderr))
	for _, name := range []string{"ATMOST_DATABASE_URL", "ATMOST_NATS_URL", "ATMOST_HTTP_ADDR", "ATMOST_SWEEP_INTERVAL", "ATMOST_SWEEP_BATCH",
		"ATMOST_SWEEP_STRANDED_AFTER", "ATMOST_SWEEP_LOOKUP_STALE", "ATMOST_SWEEP_UNRECONCILED_AFTER", "ATMOST_SWEEP_DRAIN"} {
		require.True(t, strings.Contains(stderr.String(), name), "--help documents %s", name)
	}
}

// syncWriter is the role's standard error, written by its goroutines and read by the test.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// The role as a process runs it: configuration from the environment, readiness, a pass that
// expires a lease, the metrics, and a clean stop when its context ends (SIGTERM).
func TestSweeperRoleRunsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	auths := e.authorized(e.submit("acct-1", "stalled worker"))
	e.expire([]identity.DeliveryKey{auths[0].Key})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	env := map[string]string{"ATMOST_DATABASE_URL": e.db.AppURL(), "ATMOST_NATS_URL": e.natsURL, "ATMOST_HTTP_ADDR": addr, "ATMOST_SWEEP_INTERVAL": "100ms"}
	getenv := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	stderr := &syncWriter{}
	done := make(chan int, 1)
	go func() { done <- sweep.Main(ctx, nil, getenv, stderr) }()

	get := func(path string) (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://%s%s", addr, path))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	require.Eventually(t, func() bool { code, _ := get("/readyz"); return code == http.StatusOK }, 15*time.Second, 20*time.Millisecond, "%s", stderr.String())
	require.Eventually(t, func() bool { return e.intent(auths[0].Key).State == ledger.Indeterminate }, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool {
		_, metrics := get("/metrics")
		return strings.Contains(metrics, `atmost_sweep_changes_total{duty="lease_expired"} 1`) &&
			strings.Contains(metrics, `atmost_intents{state="indeterminate"} 1`) && strings.Contains(metrics, `atmost_intents{state="authorized"} 0`)
	}, 5*time.Second, 20*time.Millisecond)
	_, metrics := get("/metrics")
	for _, name := range []string{"atmost_sweep_passes_total", "atmost_sweep_pass_seconds", "atmost_relay_events_published_total", "atmost_ledger_transaction_restarts_total", "atmost_intents", "atmost_relay_lag_seconds", "atmost_outbox_rows", "atmost_transitions_total"} {
		require.Contains(t, metrics, name)
	}
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatal("the sweeper did not stop after its context ended")
	}
	require.Contains(t, stderr.String(), "sweeper stopped cleanly")
	require.Contains(t, stderr.String(), `"lease_expired":1`)
}
