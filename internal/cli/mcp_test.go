package cli_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
)

// atmost mcp refuses a command line it cannot serve before it connects to anything: over stdio
// it needs the accounts it acts for, and TLS goes with --http, certificate and key together.
func TestMCPRefusesWhatItCannotServeBeforeConnecting(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ATMOST_NATS_URL": "nats://127.0.0.1:1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp"}, "--account"},
		{[]string{"mcp", "--account", "acct-1", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "go with --http"},
		{[]string{"mcp", "--http", "127.0.0.1:0", "--tls-cert", "c.pem"}, "together"},
		{[]string{"mcp", "--account", "acct-1", "--max-await", "0s"}, "--max-await"},
	} {
		r := run(env, c.args...)
		require.Equal(t, cli.ExitUsage, r.code, "%v: %s", c.args, r.stderr)
		require.Contains(t, r.stderr, c.want, c.args)
	}
}

// atmost mcp --http serves streamable HTTP at /mcp until interrupted, prints its address, and
// refuses a request without a producer token.
func TestMCPServesHTTPUntilInterrupted(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	nats := natstest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan int)
	env := map[string]string{"ATMOST_DATABASE_URL": db.URL, "ATMOST_NATS_URL": nats.URL}
	go func() {
		done <- cli.Run(ctx, cli.IO{Stdout: out, Stderr: out, Env: func(name string) (string, bool) { v, ok := env[name]; return v, ok }},
			[]string{"mcp", "--http", "127.0.0.1:0"})
	}()
	var url string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if u, ok := strings.CutPrefix(line, "mcp: "); ok {
				url = u
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, out.String())
	require.True(t, strings.HasSuffix(url, "/mcp"), url)
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	cancel()
	require.Equal(t, cli.ExitOK, <-done, out.String())
}
