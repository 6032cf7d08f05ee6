package chaos_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/tools/chaos"
)

var (
	intents   = flag.Int("chaos.intents", 600, "messages the producer publishes (make chaos: 10000)")
	seed      = flag.Int64("chaos.seed", 1, "seed of the producer's, the driver's and the platform's choices")
	isolation = flag.String("chaos.isolation", "serializable", "the roles' ledger isolation")
)

// The crash-and-fault suite, short inside make test, long under make chaos: the built binaries
// as real processes, random SIGKILLs and restarts, a NATS restart, a dispatcher paused past its
// lease; then at most one object per delivery key, nothing lost, every intent at rest in a
// declared state, every transition on ATMOST_EVENTS exactly once.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash-and-fault suite builds and runs every binary; not in -short")
	}
	db := dbtest.New(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	res, err := chaos.Run(ctx, chaos.Options{DatabaseURL: db.URL, AppDatabaseURL: db.AppURL(), Intents: *intents, Seed: *seed,
		Isolation: *isolation, Dir: dir, Out: testWriter{t}})
	if err != nil || !res.OK() {
		keepLogs(t, dir)
	}
	require.NoError(t, err)
	res.Report(os.Stdout)
	require.True(t, res.OK(), "%s", res.Line())
	require.Positive(t, res.NATSRestarts)
	require.Positive(t, res.Pauses)
	require.NotEmpty(t, res.Kills)
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
