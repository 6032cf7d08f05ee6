package reconcile_test

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

	"github.com/atmost/atmost/internal/platformsim"
	"github.com/atmost/atmost/internal/reconcile"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestReconcilerRoleRefusesABadCommandLine(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{{"--concurrency", "0"}, {"--lookup-timeout", "0s"}, {"--readback-timeout", "-1s"}, {"--scan-interval", "0s"},
		{"--retry-delay", "0s"}, {"--isolation", "snapshot"}, {"extra"}, {"--nope"}} {
		var stderr bytes.Buffer
		require.Equal(t, 2, reconcile.Main(context.Background(), args, none, &stderr), "%v", args)
		require.NotEmpty(t, stderr.String())
	}
	var stderr bytes.Buffer
	require.Equal(t, 0, reconcile.Main(context.Background(), []string{"--help"}, none, &stderr))
	for _, name := range []string{"ATMOST_DATABASE_URL", "ATMOST_NATS_URL", "ATMOST_HTTP_ADDR", "ATMOST_RECONCILE_CONCURRENCY", "ATMOST_LOOKUP_TIMEOUT",
		"ATMOST_READBACK_TIMEOUT", "ATMOST_RECONCILE_SCAN_INTERVAL", "ATMOST_RECONCILE_RETRY_DELAY"} {
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

// The role as a process runs it: configuration from the environment, readiness, one intent
// reconciled, the metrics, and a clean stop when its context ends (SIGTERM).
func TestReconcilerRoleRunsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit}}})
	keys := e.dispatched("created, answer lost")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	env := map[string]string{"ATMOST_DATABASE_URL": e.db.AppURL(), "ATMOST_NATS_URL": e.natsURL, "ATMOST_HTTP_ADDR": addr,
		"ATMOST_RECONCILE_SCAN_INTERVAL": "200ms"}
	getenv := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	stderr := &syncWriter{}
	done := make(chan int, 1)
	go func() { done <- reconcile.Main(ctx, nil, getenv, stderr) }()

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
	in := e.settle(keys, 20*time.Second)[keys[0]]
	require.Equal(t, ledger.Published, in.State)
	require.Equal(t, ledger.ReasonReconciledFound, in.Reason)
	require.Eventually(t, func() bool {
		_, metrics := get("/metrics")
		return strings.Contains(metrics, `atmost_reconcile_lookups_total{answer="found"} 1`) &&
			strings.Contains(metrics, `atmost_reconcile_turns_total{result="resolved_found"} 1`)
	}, 5*time.Second, 20*time.Millisecond)
	_, metrics := get("/metrics")
	for _, name := range []string{"atmost_relay_events_published_total", "atmost_ledger_transaction_restarts_total", "atmost_reconcile_consumer_pending", "atmost_relay_lag_seconds"} {
		require.Contains(t, metrics, name)
	}
	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatal("the reconciler did not stop after its context ended")
	}
	require.Contains(t, stderr.String(), "reconciler stopped cleanly")
	require.Equal(t, 1, e.sim.Lookups(keys[0].String()))
}
