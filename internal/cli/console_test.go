package cli_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// A shared token from the environment and from a file at once is a usage error, before the
// console connects to anything.
func TestConsoleRefusesTwoSharedTokens(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte("from-a-file\n"), 0o600))
	r := run(map[string]string{"ATMOST_CONSOLE_TOKEN": "from-env"}, "console", "--token-file", file)
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "both given")
}

// atmost console serves the console on the ledger until interrupted, and prints its address.
func TestConsoleServesUntilInterrupted(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{}
	done := make(chan int)
	go func() {
		done <- cli.Run(ctx, cli.IO{Stdout: out, Stderr: out, Env: func(name string) (string, bool) {
			if name == "ATMOST_DATABASE_URL" {
				return db.URL, true
			}
			return "", false
		}}, []string{"console", "--listen", "127.0.0.1:0"})
	}()
	var url string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if u, ok := strings.CutPrefix(line, "console: "); ok {
				url = u
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, out.String())
	require.Contains(t, out.String(), "no operator can log in yet: add one with atmost operators add NAME --role operator")
	resp, err := http.Get(url + "/login")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	cancel()
	require.Equal(t, cli.ExitOK, <-done, out.String())
}

// A console token that can be guessed is refused at start, naming how to make one, before
// anything is served (ATMOST_CONSOLE_TOKEN=a once served on 0.0.0.0).
func TestConsoleRefusesAWeakToken(t *testing.T) {
	t.Parallel()
	r := run(map[string]string{"ATMOST_CONSOLE_TOKEN": "a"}, "console", "--listen", "0.0.0.0:0")
	require.Equal(t, cli.ExitUsage, r.code)
	require.Contains(t, r.stderr, "openssl rand -base64 32")
}

// A reason or evidence the ledger will not store is a usage error, before any connection.
func TestAReasonTheLedgerWillNotStoreIsAUsageError(t *testing.T) {
	t.Parallel()
	env := map[string]string{"ATMOST_DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}
	r := run(env, "switch", "on", "--reason", strings.Repeat("x", 1001), "--operator", "alice")
	require.Equal(t, cli.ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "more than 1000")
}
