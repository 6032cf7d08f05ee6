package role

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRolesCollectAtTheirOwnTargetUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "") // restored after the test
	require.NoError(t, os.Unsetenv("GOGC"))
	TuneGC()
	require.Equal(t, GCPercent, debug.SetGCPercent(100), "without GOGC a role collects at GCPercent")

	t.Setenv("GOGC", "100")
	TuneGC()
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC, when set, is the operator's choice and stays")
}
