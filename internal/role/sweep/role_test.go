package sweep_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestSweeperRoleRefusesABadCommandLine(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{{"--batch", "0"}, {"--interval", "0s"}, {"--stranded-after", "-1s"}, {"--lookup-stale", "0s"},
		{"--unreconciled-after", "0s"}, {"--isolation", "snapshot"}, {"extra"}, {"--nope"}} {
		var stderr bytes.Buffer
		require.Equal(t, 2, sweep.Main(context.Background(), args, none, &stderr), "%v", args)
		require.NotEmpty(t, stderr.String())
	}
	// A variable its flag would refuse is an error, never silently the default.
	for name, value := range map[string]string{"ATMOST_SWEEP_INTERVAL": "5", "ATMOST_STREAM_REPLICAS": "three"} {
		var stderr bytes.Buffer
		getenv := func(n string) (string, bool) { return value, n == name }
		require.Equal(t, 2, sweep.Main(context.Background(), nil, getenv, &stderr), "%s=%s", name, value)
		require.Contains(t, stderr.String(), name)
	}
	var stderr bytes.Buffer
	require.Equal(t, 0, sweep.Main(context.Background(), []string{"--help"}, none, &stderr))
	for _, name := range []string{"ATMOST_DATABASE_URL", "ATMOST_NATS_URL", "ATMOST_HTTP_ADDR", "ATMOST_SWEEP_INTERVAL", "ATMOST_SWEEP_BATCH",
		"ATMOST_SWEEP_STRANDED_AFTER", "ATMOST_SWEEP_LOOKUP_STALE", "ATMOST_SWEEP_UNRECONCILED_AFTER", "ATMOST_SWEEP_DRAIN"} {
		require.True(t, strings.Contains(stderr.String(), name), "--help documents %s", name)
	}
}

// The role as a process runs it: configuration from the environment, readiness, a pass that
// expires a lease, the metrics, and a clean stop when its context ends (SIGTERM).
func TestSweeperRoleRunsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	auths := e.authorized(e.Submit("acct-1", "stalled worker"))
	e.expire([]identity.DeliveryKey{auths[0].Key})
	r := roletest.Start(t, sweep.Main, map[string]string{"ATMOST_DATABASE_URL": e.DB.AppURL(), "ATMOST_NATS_URL": e.NATSURL, "ATMOST_SWEEP_INTERVAL": "100ms", "ATMOST_INSTANCE": "sw-1"})
	r.WaitReady(t)
	require.Eventually(t, func() bool { return e.Intent(auths[0].Key).State == ledger.Indeterminate }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND reason = 'lease_expired' AND actor = 'sweeper/sw-1'`, auths[0].Key.Bytes()),
		"the expiry names the sweeper process that made it")
	metrics := r.WaitMetrics(t, `atmost_sweep_changes_total{duty="lease_expired"} 1`, `atmost_intents{state="indeterminate"} 1`, `atmost_intents{state="authorized"} 0`,
		"atmost_reconcile_waiting_intents 1")
	for _, name := range []string{"atmost_sweep_passes_total", "atmost_sweep_pass_seconds", "atmost_relay_events_published_total", "atmost_ledger_transaction_restarts_total",
		"atmost_intents", "atmost_relay_lag_seconds", "atmost_outbox_rows", "atmost_transitions_total", "atmost_reconcile_oldest_waiting_seconds", "atmost_build_info"} {
		require.Contains(t, metrics, name)
	}
	r.Stop(t)
	require.Contains(t, r.Stderr(), "sweeper stopped cleanly")
	require.Contains(t, r.Stderr(), `"lease_expired":1`)
}
