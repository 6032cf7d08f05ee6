package cli_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
)

// lockedBuffer is a buffer a running command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A busy address is named with the flag that moves it, before anything starts; a bad address
// or base port is a usage error.
func TestDevNamesABusyPortAndTheFlagThatMovesIt(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	busy := ln.Addr().String()
	// An unreachable ledger: the command must stop at the port, before it tries the ledger.
	env := map[string]string{"ATMOST_DATABASE_URL": "postgres://postgres@127.0.0.1:1/atmost?sslmode=disable&connect_timeout=2"}
	free := []string{"--nats-port", "0", "--ingest-http-addr", "127.0.0.1:0", "--sweeper-http-addr", "127.0.0.1:0", "--reconciler-http-addr", "127.0.0.1:0", "--console", "127.0.0.1:0"}
	res := run(env, append([]string{"dev", "--dispatcher-http-addr", busy, "--sim", "127.0.0.1:0"}, free...)...)
	require.Equal(t, cli.ExitError, res.code, res.stderr)
	require.Contains(t, res.stderr, "atmost dev: "+busy+" (the dispatcher's /healthz, /readyz and /metrics) is in use, nothing was started")
	require.Contains(t, res.stderr, "move it with --dispatcher-http-addr, or every role with --http-base-port")
	require.NotContains(t, res.stderr, "ledger")
	res = run(env, append([]string{"dev", "--dispatcher-http-addr", "127.0.0.1:0", "--sim", busy}, free...)...)
	require.Equal(t, cli.ExitError, res.code, res.stderr)
	require.Contains(t, res.stderr, "give another --sim address")
	res = run(env, append(append([]string{"dev", "--dispatcher-http-addr", "127.0.0.1:0", "--sim", "127.0.0.1:0"}, free...), "--console", busy)...)
	require.Equal(t, cli.ExitError, res.code, res.stderr)
	require.Contains(t, res.stderr, "atmost dev: "+busy+" (the operator console) is in use, nothing was started")
	require.Contains(t, res.stderr, "give another --console address (empty: none)")
	require.NotContains(t, res.stderr, "ledger")

	// A busy NATS port is moved, never answered with the server running there: atmost's streams
	// do not go into someone else's NATS.
	res = run(env, "dev", "--nats-port", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "--ingest-http-addr", "127.0.0.1:0", "--dispatcher-http-addr", "127.0.0.1:0",
		"--sweeper-http-addr", "127.0.0.1:0", "--reconciler-http-addr", "127.0.0.1:0", "--console", "127.0.0.1:0", "--sim", "127.0.0.1:0")
	require.Equal(t, cli.ExitError, res.code, res.stderr)
	require.Contains(t, res.stderr, "(embedded NATS) is in use, nothing was started")
	require.Contains(t, res.stderr, "give another --nats-port (0: any free one; atmost dev then prints the ATMOST_NATS_URL to export)")
	require.NotContains(t, res.stderr, "ATMOST_NATS_URL to use")

	for args, want := range map[string][]string{
		"--http-base-port 65534": {"dev", "--http-base-port", "65534"},
		"give HOST:PORT":         {"dev", "--ingest-http-addr", "9101"},
	} {
		res := run(env, want...)
		require.Equal(t, cli.ExitUsage, res.code, "%v: %s", want, res.stderr)
		require.Contains(t, res.stderr, args)
	}
}

// ATMOST_HTTP_ADDR is one role's address: atmost dev gives each role its own instead, so the
// roles do not collide on it, and says so.
func TestDevGivesEachRoleItsOwnAddressWhateverATMOST_HTTP_ADDRSays(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Empty())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	api, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	apiAddr := api.Addr().String()
	require.NoError(t, api.Close())
	env := map[string]string{"ATMOST_DATABASE_URL": db.URL, "ATMOST_HTTP_ADDR": ln.Addr().String(), "ATMOST_INGEST_HTTP_API": apiAddr}
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, cli.IO{Stdout: &stdout, Stderr: &stderr, Env: func(name string) (string, bool) { v, ok := env[name]; return v, ok }},
			[]string{"dev", "--nats-port", "0", "--data-dir", t.TempDir(), "--log", t.TempDir() + "/roles.log", "--ingest-http-addr", "127.0.0.1:0",
				"--dispatcher-http-addr", "127.0.0.1:0", "--sweeper-http-addr", "127.0.0.1:0", "--reconciler-http-addr", "127.0.0.1:0", "--console", "127.0.0.1:0", "--sim", "127.0.0.1:0"})
	}()
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "running; Ctrl-C") }, 30*time.Second, 50*time.Millisecond,
		"stdout: %s\nstderr: %s", &stdout, &stderr)
	require.Contains(t, stdout.String(), "roles (/healthz, /readyz and /metrics): ingest 127.0.0.1:0, dispatcher 127.0.0.1:0, sweeper 127.0.0.1:0, reconciler 127.0.0.1:0")
	require.Contains(t, stderr.String(), "atmost dev: ATMOST_HTTP_ADDR is one role's address and is not used")
	require.Regexp(t, `(?m)^console: http://127\.0\.0\.1:[1-9][0-9]*$`, stdout.String(), "the console's address, printed")
	// ingest's own setting reaches it, and dev says where the producers' HTTP API is.
	require.Contains(t, stdout.String(), "producers' HTTP API (ATMOST_INGEST_HTTP_API): http://"+apiAddr+" ")
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + apiAddr + "/v1/intents/dk1:" + strings.Repeat("0", 64))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized
	}, 20*time.Second, 50*time.Millisecond, "the API answers, and wants a token")
	// Every role keeps running: none failed on a taken address.
	time.Sleep(2 * time.Second)
	select {
	case code := <-done:
		t.Fatalf("atmost dev stopped on its own with %d: %s", code, &stderr)
	default:
	}
	cancel()
	require.Equal(t, cli.ExitOK, <-done, stderr.String())
	require.Contains(t, stdout.String(), "stopped")
}

// atmost dev prints the ledger's and NATS's URLs: never with their passwords, which its
// output, pasted into a ticket or a chat, must not carry.
func TestDevNeverPrintsAPassword(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Empty())
	dbURL, err := url.Parse(db.URL)
	require.NoError(t, err)
	dbSecret, ok := dbURL.User.Password()
	if !ok {
		// The test server trusts loopback: a password is taken, and not checked.
		dbSecret = "pg-s3cret"
		dbURL.User = url.UserPassword(dbURL.User.Username(), dbSecret)
	}
	const natsSecret = "nats-s3cret"
	srv := natstest.NewWithConfig(t, `authorization { user: atmost, password: "`+natsSecret+`" }`)
	natsURL := "nats://atmost:" + natsSecret + "@" + strings.TrimPrefix(srv.URL, "nats://")
	logFile := t.TempDir() + "/roles.log"
	env := map[string]string{"ATMOST_DATABASE_URL": dbURL.String()}
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, cli.IO{Stdout: &stdout, Stderr: &stderr, Env: func(name string) (string, bool) { v, ok := env[name]; return v, ok }},
			[]string{"dev", "--nats-url", natsURL, "--log", logFile, "--ingest-http-addr", "127.0.0.1:0",
				"--dispatcher-http-addr", "127.0.0.1:0", "--sweeper-http-addr", "127.0.0.1:0", "--reconciler-http-addr", "127.0.0.1:0", "--console", "", "--sim", ""})
	}()
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "running; Ctrl-C") }, 30*time.Second, 50*time.Millisecond,
		"stdout: %s\nstderr: %s", &stdout, &stderr)
	cancel()
	require.Equal(t, cli.ExitOK, <-done, stderr.String())
	require.Contains(t, stdout.String(), "NATS: nats://atmost:xxxxx@", "the NATS server is named")
	require.Contains(t, stdout.String(), "ledger: "+dbURL.Scheme+"://"+dbURL.User.Username()+":xxxxx@", "the ledger is named")
	logs, err := os.ReadFile(logFile)
	require.NoError(t, err)
	for what, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String(), "the roles' log": string(logs)} {
		require.NotContains(t, out, natsSecret, what)
		require.NotContains(t, out, dbSecret, what)
	}
}

// atmost demo takes its database from its own URL (ATMOST_DEMO_DATABASE_URL, not the ledger's)
// and refuses one it did not create; its roles log to a file of the run's own, never to a
// fixed name in the shared $TMPDIR.
func TestDemoLogsToAFileOfItsOwnAndRefusesADatabaseItDidNotCreate(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Empty())
	env := map[string]string{"ATMOST_DEMO_DATABASE_URL": db.URL, "ATMOST_DATABASE_URL": "postgres://postgres@127.0.0.1:1/never?sslmode=disable"}
	logs := map[string]bool{}
	for range 2 {
		res := run(env, "demo", "--console", "")
		require.Equal(t, cli.ExitError, res.code, res.stderr)
		require.Contains(t, res.stderr, "exists and was not created by atmost demo")
		_, path, ok := strings.Cut(strings.TrimSpace(res.stdout), "atmost demo: the roles log to ")
		require.True(t, ok, res.stdout)
		t.Cleanup(func() { _ = os.Remove(path) })
		require.Regexp(t, `/atmost-demo-[0-9]+\.log$`, path)
		require.FileExists(t, path)
		logs[path] = true
	}
	require.Len(t, logs, 2, "each run its own log file")
}

// atmost dev on a NATS port of its own prints the ATMOST_NATS_URL to export, with no account on
// the simulator too (an empty --sim): without it atmost's commands would read another NATS, or none.
func TestDevPrintsItsNATSURLWithoutTheSimulator(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Empty())
	env := map[string]string{"ATMOST_DATABASE_URL": db.URL}
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, cli.IO{Stdout: &stdout, Stderr: &stderr, Env: func(name string) (string, bool) { v, ok := env[name]; return v, ok }},
			[]string{"dev", "--nats-port", "0", "--data-dir", t.TempDir(), "--log", t.TempDir() + "/roles.log", "--ingest-http-addr", "127.0.0.1:0",
				"--dispatcher-http-addr", "127.0.0.1:0", "--sweeper-http-addr", "127.0.0.1:0", "--reconciler-http-addr", "127.0.0.1:0", "--console", "", "--sim", ""})
	}()
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), "running; Ctrl-C") }, 30*time.Second, 50*time.Millisecond,
		"stdout: %s\nstderr: %s", &stdout, &stderr)
	require.Regexp(t, `(?m)^  export ATMOST_NATS_URL=nats://127\.0\.0\.1:[1-9][0-9]*$`, stdout.String())
	cancel()
	require.Equal(t, cli.ExitOK, <-done, stderr.String())
}
