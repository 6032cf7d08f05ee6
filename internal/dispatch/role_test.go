package dispatch_test

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

	"github.com/atmost/atmost/internal/dispatch"
	"github.com/atmost/atmost/internal/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestDispatcherRoleRefusesABadCommandLine(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{{"--batch", "0"}, {"--isolation", "snapshot"}, {"--replicas", "2"}, {"extra"}, {"--nope"},
		{"--inflight-lease", "10s", "--send-timeout", "9s"}, {"--lease-margin", "100ms"}, {"--claim-lease", "1s"}, {"--concurrency", "0"}, {"--pipelines", "0"}, {"--gate-delay", "0s"}} {
		var stderr bytes.Buffer
		require.Equal(t, 2, dispatch.Main(context.Background(), args, none, &stderr), "%v", args)
		require.NotEmpty(t, stderr.String())
	}
	var stderr bytes.Buffer
	require.Equal(t, 0, dispatch.Main(context.Background(), []string{"--help"}, none, &stderr))
	for _, name := range []string{"ATMOST_DATABASE_URL", "ATMOST_NATS_URL", "ATMOST_HTTP_ADDR", "ATMOST_STREAM_REPLICAS", "ATMOST_LEDGER_ISOLATION",
		"ATMOST_DISPATCH_BATCH", "ATMOST_DISPATCH_CONCURRENCY", "ATMOST_DISPATCH_PIPELINES", "ATMOST_CLAIM_LEASE", "ATMOST_INFLIGHT_LEASE", "ATMOST_SEND_TIMEOUT",
		"ATMOST_READBACK_TIMEOUT", "ATMOST_LEASE_MARGIN", "ATMOST_GATE_DELAY"} {
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

// The role as a process runs it: configuration from the environment, readiness, a send, the
// metrics, and a clean stop when its context ends (SIGTERM).
func TestDispatcherRoleRunsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.submit("acct-1", "through the role")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	env := map[string]string{
		"ATMOST_DATABASE_URL": e.db.AppURL(), "ATMOST_NATS_URL": e.natsURL, "ATMOST_HTTP_ADDR": addr,
		"ATMOST_CLAIM_LEASE": "5s", "ATMOST_INFLIGHT_LEASE": "10s", "ATMOST_SEND_TIMEOUT": "2s", "ATMOST_READBACK_TIMEOUT": "1s",
	}
	getenv := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	stderr := &syncWriter{}
	done := make(chan int, 1)
	go func() { done <- dispatch.Main(ctx, nil, getenv, stderr) }()

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
	in := e.settle(keys, 15*time.Second)[keys[0]]
	require.Equal(t, ledger.Published, in.State)
	require.Eventually(t, func() bool {
		_, metrics := get("/metrics")
		return strings.Contains(metrics, `atmost_dispatch_completions_total{state="published"} 1`) &&
			strings.Contains(metrics, `atmost_dispatch_sends_total{outcome="success"} 1`)
	}, 5*time.Second, 20*time.Millisecond)
	_, metrics := get("/metrics")
	for _, name := range []string{"atmost_dispatch_work_total", "atmost_dispatch_in_progress", "atmost_dispatch_consumer_pending",
		"atmost_relay_events_published_total", "atmost_ledger_transaction_restarts_total", "atmost_dispatch_send_seconds", "atmost_transitions_total", "atmost_relay_lag_seconds"} {
		require.Contains(t, metrics, name)
	}

	cancel()
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(15 * time.Second):
		t.Fatal("the dispatcher did not stop after its context ended")
	}
	require.Contains(t, stderr.String(), "dispatcher stopped cleanly")
}
