package role

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target every role runs with unless GOGC is set. The
// roles allocate briskly and briefly (a batch's rows, events and requests, gone when the
// batch is), so Go's default of 100 collects about twice as often as their heap needs: at
// 200 the end-to-end benchmark spends about a tenth less CPU in Go for about 45 MB more
// peak memory (docs/configuration.md#the-collector-target).
const GCPercent = 200

// TuneGC sets the collector's target to GCPercent, unless the environment's GOGC chose one.
func TuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(GCPercent)
	}
}
