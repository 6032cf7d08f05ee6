package dispatch_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
)

// creates records when each create request reached the platform and when its answer left,
// holding each for hold, so that sends which may overlap do.
type creates struct {
	h    http.Handler
	hold time.Duration
	mu   sync.Mutex
	runs [][2]time.Time
}

func (c *creates) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		c.h.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	time.Sleep(c.hold)
	c.h.ServeHTTP(w, r)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs = append(c.runs, [2]time.Time{start, time.Now()})
}

// startedBefore counts the creates that reached the platform before the first answer of those
// that reached it at or after from left, and the most that overlapped at any time after it.
func (c *creates) burst(from time.Time) (beforeFirstAnswer, overlapAfter int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first [2]time.Time
	for _, r := range c.runs {
		if !r[0].Before(from) && (first[1].IsZero() || r[1].Before(first[1])) {
			first = r
		}
	}
	for _, r := range c.runs {
		if !r[0].Before(from) && r[0].Before(first[1]) {
			beforeFirstAnswer++
		}
	}
	for _, a := range c.runs {
		if a[0].Before(first[1]) {
			continue
		}
		n := 0
		for _, b := range c.runs {
			if !b[0].After(a[0]) && b[1].After(a[0]) {
				n++
			}
		}
		overlapAfter = max(overlapAfter, n)
	}
	return beforeFirstAnswer, overlapAfter
}

// A burst for an account the dispatcher has seen no success from goes one send first (its
// trial); once that succeeded the rest go at the dispatcher's concurrency; after ColdAfter
// without a success the account is cold again (docs/design.md#the-bound-on-sends-to-a-platform-that-is-down).
func TestAColdAccountSendsOneIntentUntilOneSucceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	c := &creates{h: e.sim.Handler(), hold: 150 * time.Millisecond}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	e.addAccount("acct-cold", fmt.Sprintf(`{"url":%q}`, srv.URL))
	cfg := e.config()
	cfg.ColdAfter = 2 * time.Second
	e.run(cfg)

	for round := range 2 {
		from := time.Now()
		keys := e.Submit("acct-cold", worldtest.Texts(fmt.Sprintf("a burst, round %d", round), 20)...)
		intents := e.settle(keys, 30*time.Second)
		require.Equal(t, map[ledger.State]int{ledger.Published: len(keys)}, states(intents))
		trial, overlap := c.burst(from)
		t.Logf("round %d: %d send(s) before the trial's answer, then up to %d at once", round, trial, overlap)
		require.Equal(t, 1, trial, "a cold account's first send goes alone")
		require.Greater(t, overlap, 1, "once it succeeded, the account's sends go at the dispatcher's concurrency")
		time.Sleep(cfg.ColdAfter + 500*time.Millisecond) // quiet: cold again
	}
}

// A burst due while its platform is down, for an account the dispatcher has not sent to (the
// issue's outage with nothing in flight before it): the platform receives one trial, then the
// ledger's suspect slot lets trip_failures - 1 more through, one at a time, and the account
// trips; not one send per slot of the dispatcher's concurrency.
func TestABurstToAPlatformThatIsDownSendsTripFailuresBeforeTheTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	platform := newOutage(t, e.sim.Handler())
	e.addAccount("acct-out", fmt.Sprintf(`{"url":%q}`, "http://"+platform.addr))
	const tripFailures = 3
	e.Exec(`UPDATE policies SET trip_failures = $1, probe_base_ms = 60000, backoff_base_ms = 100 WHERE scope = ''`, tripFailures)
	cfg := e.config() // batches of 16, 32 sends at once
	e.run(cfg)
	e.retrying(100 * time.Millisecond)

	platform.stop()
	keys := e.Submit("acct-out", worldtest.Texts("due while it is down", 64)...)
	require.Eventually(t, func() bool { return e.healthOf("acct-out").State != ledger.Serving }, 20*time.Second, 20*time.Millisecond)
	time.Sleep(time.Second) // what was on its way has landed
	sends := e.Count(`SELECT count(*) FROM history h JOIN intents i USING (delivery_key) WHERE i.account_id = 'acct-out' AND h.to_state = 'authorized'`)
	t.Logf("%d intents due, %d sends possible at once: %d sends before the account held", len(keys), cfg.Concurrency, sends)
	require.LessOrEqual(t, sends, tripFailures, "one trial, then trip_failures - 1 through the suspect slot")

	platform.start()
	_, err := e.Ledger.ResumeAccount(e.Ctx, "acct-out", ledger.Actor{Name: "test", Reason: "the platform is back"})
	require.NoError(t, err)
	e.sweeping(200 * time.Millisecond)
	intents := e.Settle(keys, 60*time.Second, func(s ledger.State) bool { return s != ledger.Published && s != ledger.Parked })
	require.Equal(t, map[ledger.State]int{ledger.Published: len(keys)}, states(intents))
	for _, k := range keys {
		require.Equal(t, 1, e.sim.Created(k.String()), "published once")
	}
}

// A warm account is cold again as soon as the dispatcher sees one of its sends fail, or the
// ledger says it holds: its next burst waits for a trial.
func TestAFailureOrAHoldMakesAnAccountColdAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	platform := newOutage(t, e.sim.Handler())
	e.addAccount("acct-out", fmt.Sprintf(`{"url":%q}`, "http://"+platform.addr))
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, e.config())
	require.NoError(t, err)
	e.Run(d.Run)

	warmUp := func(text string) {
		t.Helper()
		keys := e.Submit("acct-out", text)
		require.Equal(t, ledger.Published, e.settle(keys, 20*time.Second)[keys[0]].State)
		require.Eventually(t, func() bool { return dispatch.Warm(d, "acct-out") }, 5*time.Second, 10*time.Millisecond, "a success makes it warm")
	}
	warmUp("a success")
	platform.stop()
	keys := e.Submit("acct-out", "a failure")
	require.Eventually(t, func() bool { return e.Intent(keys[0]).State == ledger.Failed }, 20*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return !dispatch.Warm(d, "acct-out") }, 5*time.Second, 10*time.Millisecond, "a failure seen makes it cold")

	platform.start()
	warmUp("a success again")
	e.Exec(`UPDATE account_health SET state = 'holding', cause = 'platform_unavailable', since = now(), next_probe_at = now() + INTERVAL '1 hour', version = version + 1 WHERE account_id = 'acct-out'`)
	e.Submit("acct-out", "held")
	require.Eventually(t, func() bool { return !dispatch.Warm(d, "acct-out") }, 10*time.Second, 10*time.Millisecond, "a hold makes it cold")
}
