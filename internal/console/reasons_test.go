package console

import (
	"testing"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/stretchr/testify/require"
)

func TestEveryReasonHasAMeaning(t *testing.T) {
	for r := range atmosttype.Reasons() {
		require.NotEmpty(t, reasonMeaning[r], r)
	}
	for r := range reasonMeaning {
		_, ok := r.Rule()
		require.True(t, ok, "%s is not a reason of the ledger", r)
	}
}
