package console_test

import "github.com/atmost/atmost/pkg/ledger"

// newClaimToken mints the token of one lookup claim, as the reconciler does before it asks.
func newClaimToken() ledger.ClaimToken {
	t, err := ledger.NewClaimToken()
	if err != nil {
		panic(err)
	}
	return t
}
