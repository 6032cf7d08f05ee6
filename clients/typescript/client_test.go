// Package typescript_test runs the TypeScript client's own tests (test/*.test.mjs, node's test
// runner) and the TypeScript example agent against a real ledger, JetStream, the ingest role
// (with the outcome service and the HTTP API) and a dispatcher sending to the platform
// simulator, as a producer written in TypeScript meets them.
package typescript_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// The example agent's directory, from this package's.
const agentDir = "../../examples/ts-agent"

// needs finds node and npm and the packages `npm ci` installs in dir (make test and .ci/run
// install them): under CI=true their absence fails the test, elsewhere it skips naming the fix.
func needs(t *testing.T, dirs ...string) (node, npm string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("the TypeScript client's tests need Node.js 20 or later (node on PATH): %v", err)
	}
	npm, err = exec.LookPath("npm")
	if err != nil {
		missing("the TypeScript client's tests need npm on PATH: %v", err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
			missing("%s has no packages installed: run `npm ci` there (make test does): %v", dir, err)
		}
	}
	return node, npm
}

// run runs a command in dir with env added and fails the test, with its output, when it fails.
func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	require.NoError(t, err, "%s %s in %s:\n%s", name, strings.Join(args, " "), dir, out.String())
	return out.String()
}

func TestTheTypeScriptClient(t *testing.T) {
	t.Parallel()
	dbtest.SkipInShortLane(t, "it builds the TypeScript client and runs node against a ledger of its own, JetStream and the roles")
	node, npm := needs(t, ".", agentDir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The package as a producer's build makes it: tsc type-checks the sources into dist/.
	run(t, ctx, ".", nil, npm, "run", "--silent", "build")

	w := worldtest.New(t)
	_, simURL := w.Simulator(platformsim.Config{})
	unlimited := 0
	for _, a := range []string{"ts-1", "ts-2", "agent-1"} {
		require.NoError(t, w.Ledger.AddAccount(w.Ctx, ledger.Account{ID: a, Platform: sim.Name, Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, simURL))}, ledger.Actor{Name: "test", Reason: "a test account"}))
		_, err := w.Ledger.SetPolicy(w.Ctx, a, ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "test", Reason: "not about the rate limit"})
		require.NoError(t, err)
	}
	// The HTTP API's producer token acts for ts-1 and for ts-nobody, an account nobody configured.
	token, err := w.Ledger.AddProducer(w.Ctx, "ts-bot", []string{"ts-1", "ts-nobody"}, ledger.Actor{Name: "test", Reason: "the TypeScript client's HTTP tests"})
	require.NoError(t, err)
	in := roletest.Start(t, ingest.Main, map[string]string{"ATMOST_DATABASE_URL": w.DB.AppURL(), "ATMOST_NATS_URL": w.NATSURL},
		"--relay-interval", "100ms", "--http-api", "127.0.0.1:0")
	in.WaitReady(t)
	api, ok := httpAPI(in.Stderr())
	require.True(t, ok, "ingest logged no HTTP API address: %s", in.Stderr())
	roletest.Start(t, dispatch.Main, map[string]string{"ATMOST_DATABASE_URL": w.DB.AppURL(), "ATMOST_NATS_URL": w.NATSURL,
		"ATMOST_CLAIM_LEASE": "5s", "ATMOST_INFLIGHT_LEASE": "10s", "ATMOST_SEND_TIMEOUT": "2s", "ATMOST_READBACK_TIMEOUT": "1s"}).WaitReady(t)
	env := []string{"ATMOST_NATS_URL=" + w.NATSURL, "ATMOST_TEST_ACCOUNT=ts-1", "ATMOST_TEST_OTHER_ACCOUNT=ts-2",
		"ATMOST_TEST_VECTORS=" + mustAbs(t, "../../testdata/identity-vectors.json"),
		"ATMOST_HTTP_URL=http://" + api, "ATMOST_HTTP_TOKEN=" + token}

	out := run(t, ctx, ".", env, node, "--test", "--test-reporter=spec", "test/")
	t.Logf("node --test:\n%s", out)
	require.Regexp(t, `(?m)^ℹ fail 0$`, out)
	require.NotRegexp(t, `(?m)^ℹ (pass|tests) 0$`, out, "node ran no test")

	// What the TypeScript client published reached the ledger and the platform.
	require.Positive(t, w.Count(`SELECT count(*) FROM intents WHERE account_id = 'ts-1' AND state = 'published'`))

	t.Run("the example agent", func(t *testing.T) {
		run(t, ctx, agentDir, nil, npm, "run", "--silent", "build")
		out := run(t, ctx, agentDir, []string{"ATMOST_NATS_URL=" + w.NATSURL}, node, "dist/agent.js", "--account", "agent-1", "--text", "Hello from TypeScript")
		require.Regexp(t, regexp.MustCompile(`(?m)^published dk1:[0-9a-f]{64} as message \d+ of ATMOST_INTENTS`), out)
		require.Regexp(t, regexp.MustCompile(`(?m)^published published \(done\) \S+$`), out)
		require.Equal(t, 1, w.Count(`SELECT count(*) FROM intents WHERE account_id = 'agent-1' AND state = 'published'`))

		// An account nobody configured: the agent learns ingest's refusal and its remedy, and exits 1.
		cmd := exec.CommandContext(ctx, node, "dist/agent.js", "--account", "nobody", "--text", "for nobody")
		cmd.Dir = agentDir
		cmd.Env = append(os.Environ(), "ATMOST_NATS_URL="+w.NATSURL)
		b, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "%s", b)
		require.Equal(t, 1, exit.ExitCode(), "%s", b)
		require.Contains(t, string(b), "unknown_account")
		require.Contains(t, string(b), "atmost rejects replay --account nobody")
	})
}

// httpAPI finds the HTTP API's address in ingest's start-up line (its "http_api" field).
func httpAPI(log string) (string, bool) {
	for _, line := range strings.Split(log, "\n") {
		var entry struct {
			Msg     string `json:"msg"`
			HTTPAPI string `json:"http_api"`
		}
		if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "ingest running" && entry.HTTPAPI != "" {
			return entry.HTTPAPI, true
		}
	}
	return "", false
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	require.NoError(t, err)
	return a
}
