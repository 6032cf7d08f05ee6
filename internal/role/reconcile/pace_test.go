package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// The role as deployed, with a scan interval far longer than the test: every unknown outcome
// is looked up once and resolved from its indeterminate event alone, and the scan took up none.
func TestAnUnknownOutcomeIsResolvedFromItsEventAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: unknownOutcomes}})
	keys := e.dispatched(worldtest.Texts("resolved from its event", len(unknownOutcomes))...)
	r := roletest.Start(t, reconcile.Main, map[string]string{"ATMOST_DATABASE_URL": e.DB.AppURL(), "ATMOST_NATS_URL": e.NATSURL,
		"ATMOST_RECONCILE_SCAN_INTERVAL": "1h", "ATMOST_RECONCILE_SCAN_AFTER": "1h"})
	intents := e.settle(keys, 20*time.Second)
	for _, k := range keys {
		require.Contains(t, []ledger.State{ledger.Published, ledger.Parked}, intents[k].State)
		require.Equal(t, 1, e.sim.Lookups(k.String()))
	}
	r.WaitMetrics(t, "atmost_reconcile_scanned_total 0")
	r.Stop(t)
	backlog, err := e.Ledger.ReconcileBacklog(e.Ctx)
	require.NoError(t, err)
	require.Zero(t, backlog.Waiting)
}

// An intent waiting out its reconcile delay holds no worker and no place in a queue of
// workers: with one worker, every one of 40 unknown outcomes has had its waiting turn before the
// first lookup is made, and then all are looked up. (The consumer's pending bound was once
// four times the workers: four waited, the rest queued behind their delay.) The delay is far
// longer than the dispatch before the reconciler starts: an intent whose delay ran out while
// the others were still being dispatched (as in a CI run under load, with 8 s) is looked up at its
// first turn, with no waiting turn to count.
func TestWaitingIntentsHoldNoWorker(t *testing.T) {
	t.Parallel()
	const n = 40
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Seed: 3, Rates: map[platformsim.Fault]float64{platformsim.FaultDropAfterCommit: 1}}})
	e.Exec(`UPDATE accounts SET settings = jsonb_set(settings, '{reconcile_delay}', '"20s"')`)
	keys := e.dispatched(worldtest.Texts("waits without a worker", n)...)
	r := roletest.Start(t, reconcile.Main, map[string]string{"ATMOST_DATABASE_URL": e.DB.AppURL(), "ATMOST_NATS_URL": e.NATSURL,
		"ATMOST_RECONCILE_CONCURRENCY": "1", "ATMOST_RECONCILE_SCAN_INTERVAL": "1h", "ATMOST_RECONCILE_SCAN_AFTER": "1h"})
	r.WaitMetrics(t, fmt.Sprintf(`atmost_reconcile_turns_total{result="waiting_delay"} %d`, n))
	lookups := 0
	for _, c := range e.sim.Counts().Lookups {
		lookups += c
	}
	require.Zero(t, lookups, "every intent had its waiting turn before the first lookup")
	backlog, err := e.Ledger.ReconcileBacklog(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, int64(n), backlog.Waiting)
	intents := e.settle(keys, 45*time.Second)
	for _, k := range keys {
		require.Equal(t, ledger.Published, intents[k].State)
		require.Equal(t, 1, e.sim.Lookups(k.String()))
	}
	r.Stop(t)
}

// The scan is the safety net for the events the reconciler never saw: at start, and page by
// page, it takes up every intent whose lookup is still unclaimed ScanAfter past its transition,
// and none younger (whose event may still come).
func TestTheScanTakesUpWhatTheEventsMissed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Seed: 5, Rates: map[platformsim.Fault]float64{platformsim.FaultDropAfterCommit: 1}}})
	missed := e.dispatched(worldtest.Texts("its event was lost", 7)...)
	young := e.dispatched("its event was lost a moment ago")[0]
	stream, err := e.JS.Stream(e.Ctx, events.EventsStream)
	require.NoError(t, err)
	require.NoError(t, stream.Purge(e.Ctx, jetstream.WithPurgeSubject(events.StateSubjects(string(ledger.Indeterminate)))))
	for _, k := range missed {
		e.Exec(`UPDATE intents SET updated_at = now() - INTERVAL '2 minutes' WHERE delivery_key = $1`, k.Bytes())
	}
	// Past its reconcile delay, short of ScanAfter: its lookup is due, but its event may still come.
	e.Exec(`UPDATE intents SET updated_at = now() - INTERVAL '10 seconds' WHERE delivery_key = $1`, young.Bytes())
	cfg := e.config()
	cfg.ScanAfter, cfg.ScanBatch = time.Minute, 3 // three pages, in the scan at start
	e.run("reconciler-1", cfg)
	intents := e.settle(missed, 20*time.Second)
	for _, k := range missed {
		require.Equal(t, ledger.Published, intents[k].State)
		require.Equal(t, 1, e.sim.Lookups(k.String()))
	}
	// The young intent sorts last, in the page of the last missed one, and a scan that took it
	// would look it up moments after that one is published: watch for a while, not once.
	require.Never(t, func() bool {
		return e.sim.Lookups(young.String()) > 0 || e.Intent(young).State != ledger.Indeterminate
	}, 3*time.Second, 50*time.Millisecond, "younger than ScanAfter: left to its event")
}

// A scan pages on past candidates it cannot work yet (here, intents of an account whose
// reconcile delay is longer than ScanAfter), instead of reading the same page again: the one
// workable candidate sorts after two pages of them.
func TestTheScanPagesPastWhatItCannotWorkYet(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Seed: 9, Rates: map[platformsim.Fault]float64{platformsim.FaultDropAfterCommit: 1}}})
	settings, err := json.Marshal(map[string]any{"url": e.simURL, "reconcile_delay": "1h"})
	require.NoError(t, err)
	require.NoError(t, e.Ledger.AddAccount(e.Ctx, ledger.Account{ID: "acct-slow", Platform: sim.Name, Settings: settings}, ledger.Actor{Name: "test", Reason: "a test account"}))
	slow := e.dispatch(e.Submit("acct-slow", worldtest.Texts("looked up in an hour", 4)...))
	workable := e.dispatched("looked up now")[0]
	stream, err := e.JS.Stream(e.Ctx, events.EventsStream)
	require.NoError(t, err)
	require.NoError(t, stream.Purge(e.Ctx, jetstream.WithPurgeSubject(events.StateSubjects(string(ledger.Indeterminate)))))
	for i, k := range slow {
		e.Exec(`UPDATE intents SET updated_at = now() - $2::INT * INTERVAL '1 second' WHERE delivery_key = $1`, k.Bytes(), 300-i)
	}
	e.Exec(`UPDATE intents SET updated_at = now() - INTERVAL '2 minutes' WHERE delivery_key = $1`, workable.Bytes())
	cfg := e.config()
	cfg.ScanAfter, cfg.ScanBatch = time.Minute, 2
	e.run("reconciler-1", cfg)
	require.Equal(t, ledger.Published, e.settle([]identity.DeliveryKey{workable}, 20*time.Second)[workable].State)
	for _, k := range slow {
		require.Equal(t, ledger.Indeterminate, e.Intent(k).State)
		require.Zero(t, e.sim.Lookups(k.String()))
	}
}

// adapter wraps the simulator's adapter: it counts lookups per key and can answer them, or the
// read-back, otherwise than the platform would.
type adapter struct {
	platform.Adapter
	lookup   func(platform.Lookup) platform.Lookup
	readBack func(platform.Object) platform.Object
	mu       sync.Mutex
	lookups  map[identity.DeliveryKey]int
}

func (a *adapter) Lookup(ctx context.Context, r platform.Request) platform.Lookup {
	a.mu.Lock()
	a.lookups[r.Key]++
	a.mu.Unlock()
	lk := a.Adapter.Lookup(ctx, r)
	if a.lookup != nil {
		lk = a.lookup(lk)
	}
	return lk
}

func (a *adapter) ReadBack(ctx context.Context, r platform.Request, objectID string) (platform.Object, error) {
	obj, err := a.Adapter.ReadBack(ctx, r, objectID)
	if err == nil && a.readBack != nil {
		obj = a.readBack(obj)
	}
	return obj, err
}

func (a *adapter) count(k identity.DeliveryKey) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lookups[k]
}

// reconcileThrough runs one reconciler whose accounts open through a.
func (e *env) reconcileThrough(a *adapter) {
	e.T.Helper()
	a.lookups = map[identity.DeliveryKey]int{}
	cfg := e.config()
	cfg.Platforms = a.platforms()
	e.run("reconciler-1", cfg)
}

// One reconciler makes one lookup per indeterminate intent, whatever the lookup answered: an
// unavailable platform parks the intent for a person, it is never asked again.
func TestALookupAnsweredUnavailableIsNeverMadeAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: unknownOutcomes}})
	keys := e.dispatched(worldtest.Texts("the platform could not tell", len(unknownOutcomes))...)
	a := &adapter{lookup: func(platform.Lookup) platform.Lookup {
		return platform.Lookup{Result: platform.Unavailable, Detail: map[string]any{"why": "the test's platform is down"}}
	}}
	e.reconcileThrough(a)
	intents := e.settle(keys, 20*time.Second)
	for _, k := range keys {
		require.Equal(t, ledger.Parked, intents[k].State)
		require.Equal(t, ledger.ReasonReconcileUnavailable, intents[k].Reason)
		require.Equal(t, 1, a.count(k), "one lookup for %s", k)
	}
	e.eventsMatchHistory()
}

// An object found under the intent's key that reads back with another text is not this
// intent's post as far as anyone can prove: parked for a person, never published.
func TestAFoundObjectThatReadsBackAnotherTextIsNotPublished(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit}}})
	key := e.dispatched("the text that was meant")[0]
	require.Equal(t, 1, e.sim.Created(key.String()))
	a := &adapter{readBack: func(o platform.Object) platform.Object { o.Text = "a text nobody meant"; return o }}
	e.reconcileThrough(a)
	in := e.settle([]identity.DeliveryKey{key}, 20*time.Second)[key]
	require.Equal(t, ledger.Parked, in.State)
	require.Equal(t, ledger.ReasonReconcileUnavailable, in.Reason)
	require.Empty(t, in.ObjectID)
	require.Equal(t, 1, a.count(key))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM reconciliations WHERE step = 'resolved' AND result = 'unavailable'
		AND detail->>'why' LIKE 'the found object did not read back%'`))
}

// "Proven not sent" makes an intent retryable, so it counts only from an adapter whose
// capabilities declare an idempotency-status lookup; from any other it is a plain not-found.
func TestProvenNotSentCountsOnlyFromAnAdapterThatDeclaresIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropBeforeRead}}})
	key := e.dispatched("nothing was created, but who can prove it")[0]
	a := &adapter{lookup: func(lk platform.Lookup) platform.Lookup { lk.ProvenNotSent = lk.Result == platform.NotFound; return lk }}
	e.reconcileThrough(a)
	in := e.settle([]identity.DeliveryKey{key}, 20*time.Second)[key]
	require.False(t, a.Capabilities().StatusLookup)
	require.Equal(t, ledger.Parked, in.State)
	require.Equal(t, ledger.ReasonReconcileNotFound, in.Reason)
	require.Equal(t, 1, a.count(key))
}
