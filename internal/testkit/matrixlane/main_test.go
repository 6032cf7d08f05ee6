package matrixlane_test

import (
	"os"
	"testing"

	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/matrixlane"
)

// dendriteDir holds the package's one Dendrite's state; removed after the tests.
var dendriteDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "atmost-dendrite-")
	if err != nil {
		panic(err)
	}
	dendriteDir = dir
	code := m.Run()
	matrixlane.StopShared()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// server is the package's Dendrite, started by the first test that asks. Not in make
// test-short's lane: starting it takes seconds.
func server(t *testing.T) *matrixlane.Server {
	t.Helper()
	dbtest.SkipInShortLane(t, "it starts a Dendrite")
	return matrixlane.Shared(t, dendriteDir)
}
