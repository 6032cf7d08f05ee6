package sweep_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/pkg/ledger"
)

// waitingGauge scrapes s and returns atmost_account_waiting_intents by account and cause.
func waitingGauge(t *testing.T, s *sweep.Sweeper) map[[2]string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collectors()...)
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[[2]string]float64{}
	for _, f := range families {
		if f.GetName() != "atmost_account_waiting_intents" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[[2]string{labels["account"], labels["cause"]}] = m.GetGauge().GetValue()
		}
	}
	return out
}

// The gauge counts, per account that cannot be served, its pending intents and why: the
// account disabled, an adapter that does not open (a row naming a platform this build does not
// have), a kill switch over them all. An account that is served is not listed.
func TestTheWaitingGaugeCountsEachHeldAccountsPendingIntents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-old', 'nosuch')`)
	e.Submit("acct-1", "disabled a", "disabled b")
	e.Submit("acct-2", "served")
	e.Submit("acct-old", "old a", "old b", "old c")
	e.authorized(e.Submit("acct-1", "authorized before the disable"))
	s := e.sweeper("sweeper-1", sweep.Config{})
	require.Equal(t, map[[2]string]float64{{"acct-old", "adapter_unavailable"}: 3}, waitingGauge(t, s))

	_, err := e.Ledger.SetAccountDisabled(e.Ctx, "acct-1", true, ledger.Actor{Name: "test", Reason: "held"})
	require.NoError(t, err)
	require.Equal(t, map[[2]string]float64{{"acct-1", "account_disabled"}: 2, {"acct-old", "adapter_unavailable"}: 3}, waitingGauge(t, s))

	_, err = e.Ledger.SetSwitch(e.Ctx, ledger.GlobalScope, true, ledger.Actor{Name: "test", Reason: "incident"})
	require.NoError(t, err)
	require.Equal(t, map[[2]string]float64{{"acct-1", "kill_switch"}: 2, {"acct-2", "kill_switch"}: 1, {"acct-old", "kill_switch"}: 3}, waitingGauge(t, s))
}
