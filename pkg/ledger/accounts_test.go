package ledger_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestAccountsAreAddedOnceAndValidated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.NoError(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "acct.two", Platform: "webhook", CredentialRef: "env:HOOK_TOKEN",
		Settings: json.RawMessage(`{"url":"https://example.org/hook"}`)}))
	require.ErrorIs(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "acct.two", Platform: "webhook"}), ledger.ErrAccountExists)
	var rej *identity.RejectError
	require.ErrorAs(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "bad\u0007id", Platform: "sim"}), &rej)
	require.Error(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "no-platform"}))
	require.Error(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "bad-settings", Platform: "sim", Settings: json.RawMessage(`[1]`)}))

	accounts, err := e.l.Accounts(e.ctx)
	require.NoError(t, err)
	require.Len(t, accounts, 2) // acct-1 from the env, and acct.two
	require.Equal(t, "acct.two", accounts[1].ID)
	require.Equal(t, int64(1), accounts[1].CredentialVersion)
	require.JSONEq(t, `{"url":"https://example.org/hook"}`, string(accounts[1].Settings))
}

// Rotating the credential refuses attempts opened with the old one; revoking refuses every
// authorization until the next rotation.
func TestRotateAndRevokeReachAuthorization(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.claim("opened before the rotation")
	v, err := e.l.RotateCredential(e.ctx, account, "vault:acct-1/v2")
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	a, err := e.l.Authorize(e.ctx, old, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonCredentialRotating, a.Reason)

	_, err = e.l.RevokeCredential(e.ctx, account)
	require.NoError(t, err)
	c := e.claim("after the revocation")
	a, err = e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonCredentialRevoked, a.Reason)

	_, err = e.l.RotateCredential(e.ctx, account, "")
	require.NoError(t, err)
	fresh := e.claim("after the new credential")
	a, err = e.l.Authorize(e.ctx, fresh, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "reason %s", a.Reason)

	_, err = e.l.RotateCredential(e.ctx, "acct-nobody", "")
	require.ErrorIs(t, err, ledger.ErrUnknownAccount)
}
