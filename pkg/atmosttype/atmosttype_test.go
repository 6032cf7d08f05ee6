package atmosttype_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/atmosttype"
)

// The tables are handed out as copies: an importer that changes what it was given changes
// nothing for the next caller.
func TestTheVocabularyIsHandedOutAsCopies(t *testing.T) {
	states := atmosttype.States()
	states[0] = "scribbled"
	require.Equal(t, atmosttype.Pending, atmosttype.States()[0])
	require.False(t, atmosttype.State("scribbled").Valid())

	reasons := atmosttype.Reasons()
	reasons[atmosttype.ReasonSendUnknown] = atmosttype.ReasonRule{State: atmosttype.Failed, Retry: atmosttype.RetryYes}
	delete(reasons, atmosttype.ReasonSubmitted)
	rule, ok := atmosttype.ReasonSendUnknown.Rule()
	require.True(t, ok)
	require.Equal(t, atmosttype.ReasonRule{State: atmosttype.Indeterminate, Retry: atmosttype.RetryNever}, rule)
	require.Contains(t, atmosttype.Reasons(), atmosttype.ReasonSubmitted)

	atmosttype.DefaultUnavailableStatuses()[0] = 200
	require.Equal(t, []int{429, 503}, atmosttype.DefaultUnavailableStatuses())
	atmosttype.DefaultAuthStatuses()[0] = 200
	require.Equal(t, []int{401, 403}, atmosttype.DefaultAuthStatuses())
}

// Every reason leads to one of the six states.
func TestEveryReasonLeadsToAState(t *testing.T) {
	require.Len(t, atmosttype.States(), 6)
	for r, rule := range atmosttype.Reasons() {
		require.True(t, rule.State.Valid(), r)
	}
}
