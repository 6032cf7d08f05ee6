package reconcile_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestReconcilerRoleRefusesABadCommandLine(t *testing.T) {
	t.Parallel()
	none := func(string) (string, bool) { return "", false }
	for _, args := range [][]string{{"--concurrency", "0"}, {"--lookup-timeout", "0s"}, {"--readback-timeout", "-1s"}, {"--scan-interval", "0s"},
		{"--retry-delay", "0s"}, {"--isolation", "snapshot"}, {"extra"}, {"--nope"}} {
		var stderr bytes.Buffer
		require.Equal(t, 2, reconcile.Main(context.Background(), args, none, &stderr), "%v", args)
		require.NotEmpty(t, stderr.String())
	}
	var stderr bytes.Buffer
	require.Equal(t, 0, reconcile.Main(context.Background(), []string{"--help"}, none, &stderr))
	for _, name := range []string{"ATMOST_DATABASE_URL", "ATMOST_NATS_URL", "ATMOST_HTTP_ADDR", "ATMOST_RECONCILE_CONCURRENCY", "ATMOST_LOOKUP_TIMEOUT",
		"ATMOST_READBACK_TIMEOUT", "ATMOST_RECONCILE_SCAN_INTERVAL", "ATMOST_RECONCILE_RETRY_DELAY"} {
		require.True(t, strings.Contains(stderr.String(), name), "--help documents %s", name)
	}
}

// The role as a process runs it: configuration from the environment, readiness, one intent
// reconciled, the metrics, and a clean stop when its context ends (SIGTERM).
func TestReconcilerRoleRunsAndStopsCleanly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit}}})
	keys := e.dispatched("created, answer lost")
	r := roletest.Start(t, reconcile.Main, map[string]string{"ATMOST_DATABASE_URL": e.DB.AppURL(), "ATMOST_NATS_URL": e.NATSURL,
		"ATMOST_RECONCILE_SCAN_INTERVAL": "200ms", "ATMOST_INSTANCE": "rc-1"})
	r.WaitReady(t)
	in := e.settle(keys, 20*time.Second)[keys[0]]
	require.Equal(t, ledger.Published, in.State)
	require.Equal(t, ledger.ReasonReconciledFound, in.Reason)
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND reason = 'reconciled_found' AND actor = 'reconciler/rc-1'`, keys[0].Bytes()),
		"the verdict names the reconciler process that reached it")
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM reconciliations WHERE delivery_key = $1 AND actor = 'reconciler/rc-1'`, keys[0].Bytes()),
		"so do the lookup's claim and its result")
	metrics := r.WaitMetrics(t, `atmost_reconcile_lookups_total{answer="found"} 1`, `atmost_reconcile_turns_total{result="resolved_found"} 1`)
	for _, name := range []string{"atmost_relay_events_published_total", "atmost_ledger_transaction_restarts_total", "atmost_reconcile_consumer_pending", "atmost_relay_lag_seconds"} {
		require.Contains(t, metrics, name)
	}
	r.Stop(t)
	require.Contains(t, r.Stderr(), "reconciler stopped cleanly")
	require.Equal(t, 1, e.sim.Lookups(keys[0].String()))
}
