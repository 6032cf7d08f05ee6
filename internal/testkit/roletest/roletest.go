// Package roletest runs a role's Main the way a process would, for the roles' tests: its
// configuration from a map as environment, its endpoints on a loopback port the kernel picks
// (read back from the role's start-up log line), its standard error kept for the test, and a
// stop that ends its context as SIGTERM does.
package roletest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Main is a role's entry point: internal/role/ingest, dispatch, sweep and reconcile each have one.
type Main func(ctx context.Context, args []string, getenv func(string) (string, bool), stderr io.Writer) int

// Role is a role running in the test's process.
type Role struct {
	stderr *syncWriter
	cancel context.CancelFunc
	done   chan int
}

// Start runs main with env as its environment and args, until Stop or the end of the test.
// ATMOST_HTTP_ADDR is 127.0.0.1:0 unless env says otherwise: the role binds a port no other
// process holds, and says which in its start-up log line.
func Start(t *testing.T, main Main, env map[string]string, args ...string) *Role {
	t.Helper()
	r := &Role{stderr: &syncWriter{}, done: make(chan int, 1)}
	vars := map[string]string{"ATMOST_HTTP_ADDR": "127.0.0.1:0"}
	for k, v := range env {
		vars[k] = v
	}
	getenv := func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- main(ctx, args, getenv, r.stderr) }()
	t.Cleanup(cancel)
	return r
}

// Get fetches path from the role's endpoints: the status and the body (0 and the error when
// nothing answered).
func (r *Role) Get(path string) (int, string) {
	addr, ok := HTTPAddr(r.Stderr())
	if !ok {
		return 0, "the role has not logged its address yet"
	}
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// WaitReady waits until /readyz answers 200.
func (r *Role) WaitReady(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { code, _ := r.Get("/readyz"); return code == http.StatusOK }, 20*time.Second, 20*time.Millisecond,
		"the role never became ready:\n%s", r.Stderr())
}

// WaitMetrics waits until /metrics holds every one of want.
func (r *Role) WaitMetrics(t *testing.T, want ...string) string {
	t.Helper()
	var metrics string
	require.Eventually(t, func() bool {
		_, metrics = r.Get("/metrics")
		for _, w := range want {
			if !strings.Contains(metrics, w) {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "the metrics never showed %q; their families held:\n%s", want, lazyFamilies{&metrics, want})
	return metrics
}

// lazyFamilies prints, when a wait fails, the lines of the last metrics read that belong to the
// families of the samples waited for: what the count was instead.
type lazyFamilies struct {
	metrics *string
	want    []string
}

func (l lazyFamilies) String() string {
	var out []string
	for line := range strings.SplitSeq(*l.metrics, "\n") {
		for _, w := range l.want {
			family, _, _ := strings.Cut(w, "{")
			family, _, _ = strings.Cut(family, " ")
			if strings.HasPrefix(line, family) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// Stop ends the role's context (SIGTERM) and requires a clean exit (code 0) within 15 s.
func (r *Role) Stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.done:
		require.Equal(t, 0, code, r.Stderr())
	case <-time.After(15 * time.Second):
		t.Fatalf("the role did not stop after its context ended:\n%s", r.Stderr())
	}
}

// HTTPAddr finds where a role serves /healthz, /readyz and /metrics in its log: the "http"
// field of its start-up line ("ingest running", "dispatcher running", ...), which names the
// address the role bound, the port the kernel picked when it was asked for port 0.
func HTTPAddr(log string) (string, bool) {
	for _, line := range strings.Split(log, "\n") {
		var entry struct {
			Msg  string `json:"msg"`
			HTTP string `json:"http"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && strings.HasSuffix(entry.Msg, " running") && entry.HTTP != "" {
			return entry.HTTP, true
		}
	}
	return "", false
}

// Stderr is what the role wrote to its standard error so far (its JSON log lines).
func (r *Role) Stderr() string { return r.stderr.String() }

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
