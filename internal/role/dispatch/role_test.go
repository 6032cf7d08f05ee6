package dispatch_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestDispatcherRoleRefusesABadCommandLine(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{{"--batch", "0"}, {"--isolation", "snapshot"}, {"--replicas", "2"}, {"extra"}, {"--nope"},
		{"--inflight-lease", "10s", "--send-timeout", "9s"}, {"--lease-margin", "100ms"}, {"--claim-lease", "1s"}, {"--concurrency", "0"}, {"--pipelines", "0"}, {"--gate-delay", "0s"}, {"--cold-after", "0s"}} {
		var stderr bytes.Buffer
		require.Equal(t, 2, dispatch.Main(context.Background(), args, none, &stderr), "%v", args)
		require.NotEmpty(t, stderr.String())
	}
	// A variable its flag would refuse is an error, never silently the default.
	for name, value := range map[string]string{"ATMOST_DISPATCH_BATCH": "many", "ATMOST_STREAM_REPLICAS": "three"} {
		var stderr bytes.Buffer
		getenv := func(n string) (string, bool) { return value, n == name }
		require.Equal(t, 2, dispatch.Main(context.Background(), nil, getenv, &stderr), "%s=%s", name, value)
		require.Contains(t, stderr.String(), name)
	}
	var stderr bytes.Buffer
	require.Equal(t, 0, dispatch.Main(context.Background(), []string{"--help"}, none, &stderr))
	for _, name := range []string{"ATMOST_DATABASE_URL", "ATMOST_NATS_URL", "ATMOST_HTTP_ADDR", "ATMOST_STREAM_REPLICAS", "ATMOST_LEDGER_ISOLATION",
		"ATMOST_DISPATCH_BATCH", "ATMOST_DISPATCH_CONCURRENCY", "ATMOST_DISPATCH_PIPELINES", "ATMOST_CLAIM_LEASE", "ATMOST_INFLIGHT_LEASE", "ATMOST_SEND_TIMEOUT",
		"ATMOST_READBACK_TIMEOUT", "ATMOST_LEASE_MARGIN", "ATMOST_GATE_DELAY", "ATMOST_COLD_AFTER"} {
		require.True(t, strings.Contains(stderr.String(), name), "--help documents %s", name)
	}
}

// The role as a process runs it: configuration from the environment, readiness, a send, the
// metrics, and a clean stop when its context ends (SIGTERM).
func TestDispatcherRoleRunsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.Submit("acct-1", "through the role")
	r := roletest.Start(t, dispatch.Main, map[string]string{
		"ATMOST_DATABASE_URL": e.DB.AppURL(), "ATMOST_NATS_URL": e.NATSURL,
		"ATMOST_CLAIM_LEASE": "5s", "ATMOST_INFLIGHT_LEASE": "10s", "ATMOST_SEND_TIMEOUT": "2s", "ATMOST_READBACK_TIMEOUT": "1s",
	})
	r.WaitReady(t)
	in := e.settle(keys, 15*time.Second)[keys[0]]
	require.Equal(t, ledger.Published, in.State)
	// The work is counted once its transitions are published, after the completion: wait for it.
	metrics := r.WaitMetrics(t, `atmost_dispatch_completions_total{state="published"} 1`, `atmost_dispatch_sends_total{outcome="success"} 1`,
		`atmost_dispatch_work_total{result="completed"} 1`)
	for _, name := range []string{"atmost_dispatch_work_total", "atmost_dispatch_in_progress", "atmost_dispatch_consumer_pending",
		"atmost_relay_events_published_total", "atmost_ledger_transaction_restarts_total", "atmost_dispatch_send_seconds", "atmost_transitions_total", "atmost_relay_lag_seconds"} {
		require.Contains(t, metrics, name)
	}
	r.Stop(t)
	require.Contains(t, r.Stderr(), "dispatcher stopped cleanly")
}

// Two dispatcher processes are told apart in history: each writes the transitions it makes
// as dispatcher/<instance>, the instance ATMOST_INSTANCE names, or its host and pid.
func TestTwoDispatchersAreToldApartInHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	env := func(instance string) map[string]string {
		return map[string]string{
			"ATMOST_DATABASE_URL": e.DB.AppURL(), "ATMOST_NATS_URL": e.NATSURL, "ATMOST_INSTANCE": instance,
			"ATMOST_CLAIM_LEASE": "5s", "ATMOST_INFLIGHT_LEASE": "10s", "ATMOST_SEND_TIMEOUT": "2s", "ATMOST_READBACK_TIMEOUT": "1s",
		}
	}
	actors := func(key identity.DeliveryKey) []string {
		t.Helper()
		rows, err := e.DB.Pool.Query(e.Ctx, `SELECT actor FROM history WHERE delivery_key = $1 AND seq > 1 ORDER BY seq`, key.Bytes())
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return got
	}
	// One after the other, so that each intent is worked by the dispatcher the test names.
	for _, instance := range []string{"blue", "green", ""} {
		key := e.Submit("acct-1", "worked by "+instance)[0]
		r := roletest.Start(t, dispatch.Main, env(instance))
		r.WaitReady(t)
		require.Equal(t, ledger.Published, e.settle([]identity.DeliveryKey{key}, 15*time.Second)[key].State)
		r.Stop(t)
		want := "dispatcher/" + instance
		if instance == "" {
			want = "dispatcher/" + role.DefaultInstance()
		}
		require.Equal(t, []string{want, want, want}, actors(key), "claimed, authorized and published by %s", want)
		require.Contains(t, r.Stderr(), `"actor":"`+want+`"`, "its log lines name it too")
	}
}
