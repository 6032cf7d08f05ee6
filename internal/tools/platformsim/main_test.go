package platformsim_test

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/tools/platformsim"
)

// syncBuffer is a bytes.Buffer that Main and the test may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func runMain(t *testing.T, args []string, vars map[string]string) (int, string) {
	t.Helper()
	var stdout, stderr syncBuffer
	code := platformsim.Main(context.Background(), args, env(vars), &stdout, &stderr)
	return code, stderr.String()
}

func TestHelpListsEverySettingWithItsEnvironmentVariable(t *testing.T) {
	t.Parallel()
	code, out := runMain(t, []string{"--help"}, nil)
	require.Zero(t, code)
	for _, s := range []string{"-addr", "ATMOST_SIM_ADDR", "127.0.0.1:9300", "-latency", "ATMOST_SIM_LATENCY",
		"-list-lag", "ATMOST_SIM_LIST_LAG", "-status-lookup", "ATMOST_SIM_STATUS_LOOKUP", "-dedupe", "ATMOST_SIM_DEDUPE",
		"-plan", "ATMOST_SIM_PLAN", "drop_after_commit"} {
		require.Contains(t, out, s)
	}
}

func TestBadCommandLinesExitWith2AndSayWhy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--no-such-flag"}, nil, "flag provided but not defined: -no-such-flag"},
		{[]string{"--latency", "slow"}, nil, `invalid value "slow" for flag -latency`},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{nil, map[string]string{"ATMOST_SIM_DEDUPE": "maybe"}, `ATMOST_SIM_DEDUPE="maybe": must be true or false`},
		{nil, map[string]string{"ATMOST_SIM_LIST_LAG": "later"}, `ATMOST_SIM_LIST_LAG="later": must be a duration`},
		{[]string{"--latency", "-1s"}, nil, "latency -1s: must not be negative"},
		{[]string{"--plan", `{"rates":{"reject":3}}`}, nil, "--plan: platformsim: invalid fault plan: rate of reject is 3"},
		{[]string{"--plan", "/no/such/plan.json"}, nil, "--plan: reading the plan file"},
	} {
		code, out := runMain(t, c.args, c.env)
		require.Equal(t, 2, code, "%v %v", c.args, c.env)
		require.Contains(t, out, c.want)
	}
}

func TestMainServesUntilItsContextEnds(t *testing.T) {
	t.Parallel()
	plan := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(plan, []byte(`{"script":["reject"]}`), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- platformsim.Main(ctx, []string{"--addr", "127.0.0.1:0", "--plan", plan},
			// a malformed environment value is overridden by its flag; the good one is used
			env(map[string]string{"ATMOST_SIM_ADDR": "nowhere", "ATMOST_SIM_STATUS_LOOKUP": "true"}), &stdout, &stderr)
	}()
	require.Eventually(t, func() bool { return strings.HasSuffix(stdout.String(), "\n") }, 2*time.Second, 5*time.Millisecond)
	url := strings.TrimSpace(stdout.String())
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)

	c := client(t)
	require.Equal(t, http.StatusUnprocessableEntity, create(t, c, url, "a", "post", "k", `{}`).Status, "the plan file is in force")
	require.Equal(t, "not_seen", get(t, c, url+"/v1/idempotency/k").Body["status"], "the environment enabled the status lookup")
	require.Contains(t, stderr.String(), `"msg":"platformsim serving"`)
	require.Contains(t, stderr.String(), `"url":"`+url+`"`)

	cancel()
	select {
	case got := <-code:
		require.Zero(t, got)
	case <-time.After(5 * time.Second):
		t.Fatal("Main did not stop")
	}
	require.Contains(t, stderr.String(), `"msg":"platformsim stopped"`)
}

func TestMainExits1WhenTheAddressIsTaken(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	code, out := runMain(t, []string{"--addr", ln.Addr().String()}, nil)
	require.Equal(t, 1, code)
	require.Contains(t, out, "platformsim cannot start")
}
