package dispatch_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTimes is the CPU time this process and the local PostgreSQL server have used so far.
// The server's figure sums every process named postgres, including the exited backends its
// postmaster has waited for; it is zero where /proc does not show the server (another
// machine, another OS), and the benchmark then leaves it out.
func cpuTimes() (self, postgres time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open || s[open+1:end] != "postgres" {
			continue
		}
		// After the command: state is field 3; utime, stime, cutime, cstime are 14-17.
		fields := strings.Fields(s[end+1:])
		if len(fields) < 15 {
			continue
		}
		for _, f := range fields[11:15] {
			n, _ := strconv.ParseInt(f, 10, 64)
			ticks += n
		}
	}
	// Linux reports these in clock ticks of 1/100 s (USER_HZ) on every architecture Go runs on.
	return self, time.Duration(ticks) * 10 * time.Millisecond
}
