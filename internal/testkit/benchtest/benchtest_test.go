package benchtest

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestBackendsSpentCountsANewBackendWholeAndAnEndedOneNot(t *testing.T) {
	before := map[int]time.Duration{1: time.Second, 2: 3 * time.Second}
	after := map[int]time.Duration{1: 1500 * time.Millisecond, 3: 200 * time.Millisecond} // 2 ended, 3 started
	require.Equal(t, 700*time.Millisecond, BackendsSpent(before, after))
}

func TestMachineCPUSeesThisProcessBusy(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/stat is Linux's")
	}
	busy0, total0 := MachineCPU()
	require.Positive(t, total0)
	require.LessOrEqual(t, busy0, total0)
	// Spin until this process alone has used 50 ms of CPU (its own count, not a clock): the
	// machine's busy time must have grown by at least the ticks that became.
	self := func() time.Duration {
		var ru syscall.Rusage
		require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := self()
	for x := 0; self()-start < 50*time.Millisecond; x++ {
		_ = x * x
	}
	busy1, total1 := MachineCPU()
	require.Greater(t, busy1, busy0)
	require.Greater(t, total1, total0)
}
