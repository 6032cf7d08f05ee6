package reconcile_test

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

var unknownOutcomes = []platformsim.Fault{platformsim.FaultDropAfterCommit, platformsim.FaultDropBeforeRead,
	platformsim.FaultErrorAfterCommit, platformsim.FaultDropAfterRead}

// Without an idempotency-status lookup: an unknown outcome whose object exists is found, read
// back and published; one whose request never created anything is parked (not found proves
// nothing). One lookup per intent, counted by the platform.
func TestEachUnknownOutcomeIsLookedUpOnceFoundOrParked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: unknownOutcomes}})
	keys := e.dispatched(worldtest.Texts("unknown", len(unknownOutcomes))...)
	for _, k := range keys {
		require.Equal(t, ledger.Indeterminate, e.Intent(k).State)
	}
	e.run("reconciler-1", e.config())
	intents := e.settle(keys, 20*time.Second)
	for _, k := range keys {
		in := intents[k]
		if e.sim.Created(k.String()) == 1 {
			require.Equal(t, ledger.Published, in.State, "%s was created", k)
			require.Equal(t, ledger.ReasonReconciledFound, in.Reason)
			require.Equal(t, e.sim.Objects(k.String())[0].ID, in.ObjectID)
		} else {
			require.Equal(t, ledger.Parked, in.State, "%s was never created", k)
			require.Equal(t, ledger.ReasonReconcileNotFound, in.Reason)
		}
		require.Equal(t, 1, e.sim.Lookups(k.String()), "one lookup for %s", k)
		require.LessOrEqual(t, e.sim.Created(k.String()), 1)
	}
	require.Equal(t, 2, e.sim.Counts().Objects, "drop after commit and error after commit created one each")
	e.eventsMatchHistory()
}

// With the platform's idempotency-status lookup, not found proves not sent: failed (and
// retryable by policy), never parked; found is published.
func TestAStatusLookupProvesNotSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{StatusLookup: true, Plan: platformsim.Plan{Script: unknownOutcomes}})
	keys := e.dispatched(worldtest.Texts("unknown", len(unknownOutcomes))...)
	e.run("reconciler-1", e.config())
	intents := e.settle(keys, 20*time.Second)
	for _, k := range keys {
		in := intents[k]
		if e.sim.Created(k.String()) == 1 {
			require.Equal(t, ledger.Published, in.State)
			require.Equal(t, ledger.ReasonReconciledFound, in.Reason)
		} else {
			require.Equal(t, ledger.Failed, in.State)
			require.Equal(t, ledger.ReasonReconciledNotSent, in.Reason)
		}
		require.Equal(t, 1, e.sim.Lookups(k.String()))
	}
	e.eventsMatchHistory()
}

// A fenced-out worker's late success, confirmed by read-back, resolves the intent without a
// lookup. Evidence naming an object that does not read back is not trusted: the lookup decides.
func TestLateEvidenceResolvesWithoutALookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.submit("sent late", "reported an object that is not there")
	ad, err := adapters.NewCache(platform.Registry{sim.Name: sim.Open}).Open(e.account())
	require.NoError(t, err)
	var objectIDs []string
	for i, k := range keys {
		in := e.Intent(k)
		req, err := adapters.RequestOf(in)
		require.NoError(t, err)
		p, err := ad.Prepare(req)
		require.NoError(t, err)
		c, err := e.Ledger.Begin(e.Ctx, k, p.Hash, ledger.MinLease)
		require.NoError(t, err)
		a, err := e.Ledger.Authorize(e.Ctx, c, ledger.MinLease, ad.Capabilities().ContractVersion)
		require.NoError(t, err)
		require.Equal(t, ledger.Authorized, a.State)
		// The worker stalls past its lease: the sweeper makes the intent indeterminate...
		e.Exec(`UPDATE intents SET lease_expires_at = now() - INTERVAL '1 second' WHERE delivery_key = $1`, k.Bytes())
		_, err = e.Ledger.ExpireLeases(e.Ctx, 10)
		require.NoError(t, err)
		// ...then it wakes, its send goes through, and its completion is fenced: evidence.
		objectID := "obj-that-is-not-there"
		if i == 0 {
			o := ad.Send(e.Ctx, p)
			require.Equal(t, platform.Sent, o.Result)
			objectID = o.ObjectID
		}
		objectIDs = append(objectIDs, objectID)
		_, err = e.Ledger.Complete(e.Ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: objectID, Confirmed: true})
		require.ErrorIs(t, err, ledger.ErrFenced)
		require.Equal(t, ledger.Indeterminate, e.Intent(k).State)
	}
	_, err = e.Relay.Drain(e.Ctx) // the indeterminate events, as the sweeper publishes them
	require.NoError(t, err)
	e.run("reconciler-1", e.config())
	intents := e.settle(keys, 20*time.Second)

	sent := intents[keys[0]]
	require.Equal(t, ledger.Published, sent.State)
	require.Equal(t, ledger.ReasonEvidenceFound, sent.Reason)
	require.Equal(t, objectIDs[0], sent.ObjectID)
	require.Zero(t, e.sim.Lookups(keys[0].String()), "the evidence spared the lookup")

	bogus := intents[keys[1]]
	require.Equal(t, ledger.Parked, bogus.State, "evidence that does not read back proves nothing")
	require.Equal(t, ledger.ReasonReconcileNotFound, bogus.Reason)
	require.Equal(t, 1, e.sim.Lookups(keys[1].String()))
	e.eventsMatchHistory()
}

func (e *env) account() ledger.Account {
	e.T.Helper()
	gates, err := e.Ledger.Gates(e.Ctx, []string{"acct-1"})
	require.NoError(e.T, err)
	return gates["acct-1"].Account
}

// No lookup before the adapter's reconcile delay has passed since the intent became
// indeterminate: a request still in flight inside the platform must have landed first.
func TestNoLookupBeforeTheReconcileDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropBeforeRead}}})
	e.Exec(`UPDATE accounts SET settings = jsonb_set(settings, '{reconcile_delay}', '"1h"')`)
	key := e.dispatched("in flight for a while")[0]
	l, err := ledger.New(e.DB.AppPool(t), ledger.Config{Actor: "reconciler-1"})
	require.NoError(t, err)
	r, err := reconcile.New(e.Ctx, e.JS, l, relay.New(l, e.JS, relay.Config{}), e.config())
	require.NoError(t, err)
	v := r.Reconcile(e.Ctx, key)
	require.Equal(t, "waiting_delay", v.Result)
	require.Greater(t, v.Wait, 59*time.Minute)
	require.Zero(t, e.sim.Lookups(key.String()))
	require.Zero(t, e.Count(`SELECT count(*) FROM reconciliations`), "not even claimed")

	e.Exec(`UPDATE intents SET updated_at = now() - INTERVAL '61 minutes'`)
	v = r.Reconcile(e.Ctx, key)
	require.Equal(t, "resolved_not_found", v.Result)
	require.Zero(t, v.Wait)
	require.Equal(t, 1, e.sim.Lookups(key.String()))
	v = r.Reconcile(e.Ctx, key)
	require.Equal(t, "not_indeterminate", v.Result)
	require.Equal(t, 1, e.sim.Lookups(key.String()))
}

// Lookup at most once per intent across 4 reconcilers at once and a reconciler SIGKILLed after
// its claim: the killed one's intent is never looked up (the sweeper parks it for a human),
// every other intent exactly once. Counted on the simulator.
func TestFourReconcilersAndACrashAfterTheClaimLookUpAtMostOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Seed: 7, Rates: map[platformsim.Fault]float64{
		platformsim.FaultDropAfterCommit: 0.5, platformsim.FaultDropBeforeRead: 0.5}}})
	crashed := e.dispatched("the reconciler dies after claiming this one")[0]
	require.Equal(t, ledger.Indeterminate, e.Intent(crashed).State)
	e.Exec(`UPDATE intents SET updated_at = now() - INTERVAL '1 minute'`)

	child := exec.Command(os.Args[0], "-test.run", "^TestCrashingReconciler$", "-test.v")
	child.Env = append(os.Environ(), "ATMOST_CRASH_DB="+e.DB.AppURL(), "ATMOST_CRASH_NATS="+e.NATSURL)
	out, err := child.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the subprocess must die: %s", out)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "%s", out)
	require.Contains(t, string(out), "claimed, killed")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM reconciliations WHERE step = 'claimed'`))
	require.Zero(t, e.sim.Lookups(crashed.String()), "killed after the claim, before the lookup")

	keys := e.dispatched(worldtest.Texts("raced by four", 24)...)
	for i := range 4 {
		e.run("reconciler-"+string(rune('a'+i)), e.config())
	}
	intents := e.settle(keys, 30*time.Second)
	for _, k := range keys {
		require.Equal(t, 1, e.sim.Lookups(k.String()), "exactly one lookup for %s", k)
		require.Contains(t, []ledger.State{ledger.Published, ledger.Parked}, intents[k].State)
	}
	require.Equal(t, ledger.Indeterminate, e.Intent(crashed).State, "a claimed lookup is never made a second time")
	require.Zero(t, e.sim.Lookups(crashed.String()))

	// The sweeper's rule: a claim that never resolved goes to a human.
	n, err := e.Ledger.ParkUnreconciled(e.Ctx, time.Millisecond, time.Hour, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n.LookupLost)
	require.Equal(t, ledger.Parked, e.Intent(crashed).State)
	require.Zero(t, e.sim.Lookups(crashed.String()))
	_, err = e.Relay.Drain(e.Ctx) // the sweeper publishes what it parked
	require.NoError(t, err)
	e.eventsMatchHistory()
}

// TestCrashingReconciler is the subprocess of the crash test: a reconciler that kills itself
// right after its first claim. Run alone it does nothing.
func TestCrashingReconciler(t *testing.T) {
	dbURL, natsURL := os.Getenv("ATMOST_CRASH_DB"), os.Getenv("ATMOST_CRASH_NATS")
	if dbURL == "" || natsURL == "" {
		return // not the subprocess
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	l, err := ledger.New(pool, ledger.Config{Actor: "reconciler-crashing"})
	require.NoError(t, err)
	reconcile.SetCrash(func(step string) {
		if step == "after-claim" {
			_, _ = os.Stderr.WriteString("claimed, killed\n")
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	})
	var e env // only its configuration: the child has a ledger and a broker of its own
	r, err := reconcile.New(ctx, js, l, relay.New(l, js, relay.Config{}), e.config())
	require.NoError(t, err)
	go func() {
		time.Sleep(30 * time.Second)
		t.Error("no claim within 30 s")
		stop()
	}()
	require.NoError(t, r.Run(ctx))
	t.Fatal("the reconciler should have been killed after its claim")
}
