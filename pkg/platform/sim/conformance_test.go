package sim

import (
	"testing"

	"github.com/atmost/atmost/internal/testkit/simplatform"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

// The simulator adapter meets the adapter contract against the simulator, with and without
// its idempotency-status lookup.
func TestConformance(t *testing.T) {
	for _, statusLookup := range []bool{false, true} {
		name := "listing lookup"
		if statusLookup {
			name = "status lookup"
		}
		t.Run(name, func(t *testing.T) {
			platformtest.Run(t, platformtest.Harness{
				Open: func(t *testing.T) (platform.Adapter, platformtest.Platform) {
					pl := simplatform.New(t, platformsim.Config{StatusLookup: statusLookup})
					return open(t, pl.URL(), map[string]any{"status_lookup": statusLookup}), pl
				},
				Request: func(t *testing.T, text string) platform.Request { return platformtest.Post(t, account, text) },
			})
		})
	}
}
