package adapters_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/pkg/platform"
)

// atmost's own adapters are in the process's registry before any test or main runs, and the
// roles' registry is the process's: one registered by a program is theirs too.
func TestTheRolesOpenAtmostsAdaptersAndTheRegisteredOnes(t *testing.T) {
	require.Equal(t, []string{"bluesky", "email", "matrix", "sim", "webhook"}, adapters.Registered().Names())
	platform.Register("atmost-test-outside", func(platform.Account) (platform.Adapter, error) { return nil, nil })
	require.Equal(t, []string{"atmost-test-outside", "bluesky", "email", "matrix", "sim", "webhook"}, adapters.Registered().Names())
}
