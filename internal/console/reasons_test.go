package console

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger"
)

func TestEveryReasonHasAMeaning(t *testing.T) {
	for r := range ledger.Reasons {
		require.NotEmpty(t, reasonMeaning[r], r)
	}
	for r := range reasonMeaning {
		_, ok := r.Rule()
		require.True(t, ok, "%s is not a reason of the ledger", r)
	}
}
