package dbtest_test

import (
	"bytes"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// skipHelper, set in the environment, makes TestANewThatCannotReachTheServer ask for a database.
const skipHelper = "ATMOST_DBTEST_SKIP_HELPER"

// TestANewThatCannotReachTheServer is the database test the next test runs in a go test of its
// own, without a server; otherwise it does nothing.
func TestANewThatCannotReachTheServer(t *testing.T) {
	if os.Getenv(skipHelper) != "1" {
		return
	}
	dbtest.New(t)
}

// A plain go test, without -v, shows nothing of a passing package but its ok line: the skip of
// its database tests must reach the terminal anyway, on standard error, once per package.
func TestASkipIsAnnouncedWithoutVerbose(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestANewThatCannotReachTheServer$", ".")
	cmd.Env = append(os.Environ(), "CI=", skipHelper+"=1", "ATMOST_TEST_DATABASE_URL="+closedURL+"&connect_timeout=2")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout: %s\nstderr: %s", &stdout, &stderr)
	require.Contains(t, stdout.String(), "ok", "the package passes: a skip is no failure outside CI")
	require.Equal(t, 1, bytes.Count(stderr.Bytes(), []byte("dbtest: dbtest: its database tests were SKIPPED, not run: PostgreSQL is not reachable")),
		"stderr: %s", &stderr)
	require.Contains(t, stderr.String(), "run make postgres")
}

// shortLaneHelper, set in the environment, makes TestAShortLaneTest run its body.
const shortLaneHelper = "ATMOST_DBTEST_SHORT_LANE_HELPER"

// TestAShortLaneTest is the slow test the next test runs in a go test of its own; otherwise it
// does nothing.
func TestAShortLaneTest(t *testing.T) {
	if os.Getenv(shortLaneHelper) != "1" {
		return
	}
	dbtest.SkipInShortLane(t, "a slow test")
	t.Log("the slow test ran")
}

// go test -short skips a slow test, saying why and where it runs; under CI=true nothing skips,
// -short or not, so CI's run can never pass by leaving the slow tests out.
func TestTheShortLaneSkipsSlowTestsButNeverUnderCI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ci   string
		ran  bool
		want string
	}{
		{ci: "", ran: false, want: "not in the short lane (go test -short): a slow test; make test runs it"},
		{ci: "true", ran: true, want: "the slow test ran"},
	} {
		cmd := exec.Command("go", "test", "-short", "-v", "-count=1", "-run", "^TestAShortLaneTest$", ".")
		cmd.Env = append(os.Environ(), "CI="+tc.ci, shortLaneHelper+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), tc.want, "CI=%q", tc.ci)
		require.Equal(t, !tc.ran, bytes.Contains(out, []byte("--- SKIP: TestAShortLaneTest")), "CI=%q: %s", tc.ci, out)
	}
}
