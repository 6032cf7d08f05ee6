package chaos_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/tools/chaos"
	"github.com/atmost/atmost/internal/tools/chaos/faultproxy"
	"github.com/atmost/atmost/pkg/events"
)

var (
	intents   = flag.Int("chaos.intents", 600, "messages the producer publishes (make chaos, make chaos-cluster and make chaos-conn: 10000)")
	seed      = flag.Int64("chaos.seed", chaos.DefaultSeed, "seed of the producer's, the driver's and the platform's choices")
	isolation = flag.String("chaos.isolation", chaos.DefaultIsolation, "the roles' ledger isolation")
	keep      = flag.Bool("chaos.keep-logs", false, "keep the processes' logs also when the run passed")
)

func TestMain(m *testing.M) {
	code := m.Run()
	if bin.dir != "" {
		os.RemoveAll(bin.dir)
	}
	os.Exit(code)
}

// bin holds the binaries, built once for every run of the package.
var bin struct {
	once sync.Once
	dir  string
	err  error
}

func binaries(t *testing.T) string {
	bin.once.Do(func() {
		if bin.dir, bin.err = os.MkdirTemp("", "atmost-chaos-bin-"); bin.err != nil {
			return
		}
		t.Logf("chaos: building the binaries into %s", bin.dir)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		bin.err = chaos.Build(ctx, bin.dir)
	})
	require.NoError(t, bin.err)
	return bin.dir
}

// The crash-and-fault suite, short inside make test, long under make chaos: the built binaries
// as real processes, random SIGKILLs and restarts, a NATS restart, a dispatcher paused past its
// lease; then at most one object per delivery key, nothing lost, every intent at rest in a
// declared state, every transition on ATMOST_EVENTS exactly once.
func TestChaos(t *testing.T) {
	res := runChaos(t, chaos.Options{Topology: chaos.Single})
	require.Positive(t, res.NATSRestarts)
	require.Positive(t, res.Pauses)
	require.NotEmpty(t, res.Kills)
}

// The same with every role behind fault proxies to PostgreSQL and NATS, short inside make
// test, long under make chaos-conn (at both isolation levels): COMMITs cut after they were
// forwarded and before, connections reset inside a transaction, stalled for 5 to 40 s with the
// socket open, delayed; publishes and messages cut after they were forwarded. No role is
// killed: besides every promise above, no intent whose object is on the platform is parked for
// a reason only the platform's faults could give (reconcile_unavailable after a lost answer,
// say), and the platform saw no key looked up more often than the ledger claimed lookups.
func TestChaosConnections(t *testing.T) {
	res := runChaos(t, chaos.Options{Topology: chaos.Single, ConnectionFaults: true})
	require.Empty(t, res.Kills)
	// The faults are drawn at random: the run must have met the ones the suite is for.
	pg, nc := res.PostgresFaults, res.NATSConnFaults
	require.Positive(t, pg[faultproxy.CutAfterCommit], "PostgreSQL faults: %v", pg)
	require.Positive(t, pg[faultproxy.CutBeforeCommit]+pg[faultproxy.Reset], "PostgreSQL faults: %v", pg)
	require.Positive(t, nc[faultproxy.CutAfterPublish]+nc[faultproxy.CutAfterMessage], "NATS faults: %v", nc)
}

// The same on a three-node JetStream cluster with R3 streams, short inside make test, long
// under make chaos-cluster: two ingesters, four dispatchers, two sweepers, two reconcilers, each
// given every server; the leaders of ATMOST_DISPATCH and ATMOST_EVENTS SIGKILLed, the leader of
// ATMOST_EVENTS stopped until another server leads it, a server SIGKILLed at random, each
// restarted on its store; and every promise checked as on one server.
func TestChaosCluster(t *testing.T) {
	res := runChaos(t, chaos.Options{Topology: chaos.Cluster})
	require.Positive(t, res.Pauses)
	require.NotEmpty(t, res.Kills)
	require.GreaterOrEqual(t, res.NATSKills, 3, "NATS servers SIGKILLed")
	require.GreaterOrEqual(t, res.LeaderKills, 2, "stream leaders SIGKILLed")
	require.Equal(t, 1, res.NATSPauses, "a NATS server stopped past the election timeout")
	require.Empty(t, res.NATSFaults, "every NATS fault done, every server healthy after it")
	// Each leader killed or stopped was replaced, and the driver saw it.
	require.Positive(t, res.LeaderChanges[events.DispatchStream], "leader changes of %s: %v", events.DispatchStream, res.LeaderChanges)
	require.Positive(t, res.LeaderChanges[events.EventsStream], "leader changes of %s: %v", events.EventsStream, res.LeaderChanges)
}

// A run passes only if no intent was parked by the connections' faults alone and no key was
// looked up more often than its lookups were claimed, whatever else held.
func TestAResultFailsOnAParkByTheConnectionsOrALookupOverItsClaims(t *testing.T) {
	require.True(t, chaos.Result{}.OK())
	require.False(t, chaos.Result{ParkedByConnections: []string{"dk1:abc reconcile_unavailable"}}.OK())
	require.False(t, chaos.Result{LookupsOverClaims: 1}.OK())
}

// runChaos runs the suite with opts (its topology and faults; the rest from the flags and the
// test's database) and checks every promise.
func runChaos(t *testing.T, opts chaos.Options) chaos.Result {
	if testing.Short() {
		t.Skip("the crash-and-fault suite builds and runs every binary; not in -short")
	}
	db := dbtest.New(t)
	bin := binaries(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	opts.DatabaseURL, opts.AppDatabaseURL, opts.Intents, opts.Seed = db.URL, db.AppURL(), *intents, *seed
	opts.Isolation, opts.Dir, opts.Bin, opts.Out = *isolation, dir, bin, testWriter{t}
	res, err := chaos.Run(ctx, opts)
	if err != nil || !res.OK() || *keep {
		keepLogs(t, dir)
	}
	require.NoError(t, err)
	res.Report(os.Stdout)
	require.True(t, res.OK(), "%s\nparked by the connections alone: %q", res.Line(), res.ParkedByConnections)
	require.Positive(t, res.Accepted)
	// A run that sent nothing would pass every check above: most intents must be published,
	// each as one object.
	require.Greater(t, res.States["published"], res.Accepted/2, "%s", res.Line())
	// Every object is a published intent's, or one whose send's outcome stayed unknown and whose
	// one lookup could not prove it (a reconciler killed between claiming the lookup and
	// resolving it, a listing that lagged): parked for a person, who finds the object. An
	// object of an intent in any other state (failed says nothing was sent) is a lie.
	for _, u := range res.Unpublished {
		require.Regexp(t, ` parked (reconcile_not_found|reconcile_unavailable|evidence_conflict)$`, u, "an object the ledger does not account for")
	}
	require.Equal(t, res.Objects, res.States["published"]+len(res.Unpublished), "one object per published intent, and per intent parked after an unknown outcome: %q", res.Unpublished)
	return res
}

// keepLogs copies the processes' logs where a human can read them after the test's temporary
// directory is gone.
func keepLogs(t *testing.T, dir string) {
	keep, err := os.MkdirTemp("", "atmost-chaos-logs-")
	if err != nil {
		return
	}
	if err := os.CopyFS(keep, os.DirFS(dir+"/logs")); err == nil {
		t.Logf("the processes' logs are kept in %s", keep)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
