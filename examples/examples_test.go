package examples_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// The examples are programs a producer's team would write in a module of its own: built and run
// as processes against a real ledger, JetStream, the ingest and dispatcher roles and the
// platform simulator. The producer publishes and awaits "published"; the consumer, following
// the account's published events under a durable name, prints that event, and started again
// under the same name prints only what came since.
func TestTheExamplesPublishAwaitAndFollow(t *testing.T) {
	t.Parallel()
	w := worldtest.New(t)
	_, simURL := w.Simulator(platformsim.Config{})
	require.NoError(t, w.Ledger.AddAccount(w.Ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, simURL))}, ledger.Actor{Name: "test", Reason: "a test account"}))
	unlimited := 0
	_, err := w.Ledger.SetPolicy(w.Ctx, "acct-1", ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "test", Reason: "not about the rate limit"})
	require.NoError(t, err)

	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./producer", "./consumer")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	env := map[string]string{"ATMOST_DATABASE_URL": w.DB.AppURL(), "ATMOST_NATS_URL": w.NATSURL}
	roletest.Start(t, ingest.Main, env, "--relay-interval", "100ms").WaitReady(t)
	roletest.Start(t, dispatch.Main, map[string]string{"ATMOST_DATABASE_URL": w.DB.AppURL(), "ATMOST_NATS_URL": w.NATSURL,
		"ATMOST_CLAIM_LEASE": "5s", "ATMOST_INFLIGHT_LEASE": "10s", "ATMOST_SEND_TIMEOUT": "2s", "ATMOST_READBACK_TIMEOUT": "1s"}).WaitReady(t)

	follow := func() (wait func() string) {
		ctx, cancel := context.WithTimeout(w.Ctx, time.Minute)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "consumer"), "-nats-url", w.NATSURL, "-durable", "audit",
			"-account", "acct-1", "-state", "published", "-count", "1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Start())
		return func() string {
			defer cancel()
			require.NoError(t, cmd.Wait(), "consumer: %s", stderr.String())
			return stdout.String()
		}
	}
	run := func(account, text string) (string, string, error) {
		ctx, cancel := context.WithTimeout(w.Ctx, time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "producer"), "-nats-url", w.NATSURL, "-account", account, "-text", text)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	produce := func(text string) string {
		stdout, stderr, err := run("acct-1", text)
		require.NoError(t, err, "producer: %s%s", stdout, stderr)
		return stdout
	}
	keyOf := regexp.MustCompile(`^published (dk1:[0-9a-f]{64}) as message \d+ of ATMOST_INTENTS`)

	consumer := follow()
	printed := produce("hello from the example")
	m := keyOf.FindStringSubmatch(printed)
	require.NotNil(t, m, printed)
	first := m[1]
	require.Regexp(t, `(?m)^published published \(done\) \S+$`, printed, "the producer awaited its outcome")
	followed := consumer()
	require.Contains(t, followed, strings.TrimPrefix(first, "dk1:"))
	require.Contains(t, followed, "acct-1 authorized -> published (published) by dispatcher")

	consumer = follow()
	m = keyOf.FindStringSubmatch(produce("and a second one"))
	require.NotNil(t, m)
	followed = consumer()
	require.Contains(t, followed, strings.TrimPrefix(m[1], "dk1:"), "the restarted consumer resumed after the first event")
	require.NotContains(t, followed, strings.TrimPrefix(first, "dk1:"))

	// An account nobody configured: the producer learns ingest's refusal, and says so.
	_, stderr, err := run("nobody", "for an account nobody configured")
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 1, exit.ExitCode())
	require.Contains(t, stderr, "unknown_account")
}

// What the examples import is what another module can: no package of atmost's internal/.
func TestTheExamplesImportNothingInternal(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "./producer", "./consumer").CombinedOutput()
	require.NoError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/atmost/atmost/pkg/client")
	for _, d := range deps {
		require.False(t, strings.HasPrefix(d, "github.com/atmost/atmost/internal/"), d)
		require.NotContains(t, d, "github.com/jackc/", "a producer needs no database driver")
	}
}
