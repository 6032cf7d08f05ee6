package notes_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/examples/adapter/notes"
	"github.com/atmost/atmost/internal/testkit/simplatform"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

const account = "acct-notes"

// The example adapter meets the adapter contract, as every adapter registered with atmost must:
// atmost's conformance suite against the platform simulator, behind the front that plays what the
// simulator has no fault for and what an account does to its notes (internal/testkit/simplatform).
func TestConformance(t *testing.T) {
	platformtest.Run(t, platformtest.Harness{
		Open: func(t *testing.T) (platform.Adapter, platformtest.Platform) {
			pl := simplatform.New(t, platformsim.Config{})
			settings, err := json.Marshal(map[string]string{"url": pl.URL()})
			require.NoError(t, err)
			ad, err := notes.Open(platform.Account{ID: account, Platform: notes.Name, Settings: settings})
			require.NoError(t, err)
			return ad, pl
		},
		Request: func(t *testing.T, text string) platform.Request { return platformtest.Post(t, account, text) },
	})
}
