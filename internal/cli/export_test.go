package cli

import (
	"testing"
	"time"
)

// SetReplayLead sets how far before --since the replay's first read starts, until t ends. The
// setting is the package's: only a test that is not parallel may call it.
func SetReplayLead(t testing.TB, lead time.Duration) {
	saved := replayReading.lead
	replayReading.lead = lead
	t.Cleanup(func() { replayReading.lead = saved })
}
