package dispatch_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// The bound on sends to a platform that is down (docs/design.md#the-bound-on-sends-to-a-platform-that-is-down):
// once the account's first unavailable failure is recorded, at most trip_failures - 1 more
// attempts are authorized before it trips, and one per probe after, however many intents are
// due and however many sends the dispatcher may have in flight (16 here). Counted on the ledger:
// each authorized attempt is at most one request, and a stopped platform receives none to count.
func TestAfterTheFirstFailureOnlyTripFailuresMinusOneSendsGoBeforeTheTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	platform := newOutage(t, e.sim.Handler())
	e.addAccount("acct-out", fmt.Sprintf(`{"url":%q}`, "http://"+platform.addr))
	const tripFailures = 3
	e.Exec(`UPDATE policies SET trip_failures = $1, probe_base_ms = 300, probe_max_ms = 600, backoff_base_ms = 100 WHERE scope = ''`, tripFailures)
	cfg := e.config()
	cfg.Batch = 1
	cfg.Concurrency = 16
	// The ledger's bound alone, as a pool of dispatchers meets it: each dispatcher's own trial
	// of a cold account (cold_test.go) would hide it here.
	e.run(dispatch.WithoutTrials(cfg))
	e.sweeping(200 * time.Millisecond)
	authorized := func() int {
		return e.Count(`SELECT count(*) FROM history h JOIN intents i USING (delivery_key) WHERE i.account_id = 'acct-out' AND h.to_state = 'authorized'`)
	}

	platform.stop()
	first := e.Submit("acct-out", "the first failure")
	// The failure is recorded, then reported to the account's health (another transaction).
	require.Eventually(t, func() bool {
		return e.Intent(first[0]).State == ledger.Failed && e.healthOf("acct-out").Failures == 1
	}, 20*time.Second, 20*time.Millisecond, "the first failure is recorded, and nothing else is in flight")
	atFirst := authorized()
	// Failed intents are retried from now on (the first one too).
	e.retrying(100 * time.Millisecond)

	due := e.Submit("acct-out", worldtest.Texts("due after the first failure", 40)...)
	require.Eventually(t, func() bool { return e.healthOf("acct-out").State != ledger.Serving }, 20*time.Second, 20*time.Millisecond)
	time.Sleep(2 * time.Second) // a few probes
	sends := authorized() - atFirst
	probes := e.probes("acct-out")
	t.Logf("after the first failure: %d sends, %d of them probes, for %d intents due, %d sends possible at once", sends, probes, len(due)+1, cfg.Concurrency)
	require.LessOrEqual(t, sends-probes, tripFailures-1, "at most trip_failures - 1 sends before the trip, one per probe after")

	platform.start()
	all := append(append([]identity.DeliveryKey{}, first...), due...)
	intents := e.settle(all, 30*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: len(all)}, states(intents))
	for _, k := range all {
		require.Equal(t, 1, e.sim.Created(k.String()), "published once")
	}
}
