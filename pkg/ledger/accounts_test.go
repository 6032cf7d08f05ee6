package ledger_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestAccountsAreAddedOnceAndValidated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.NoError(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "acct.two", Platform: "webhook", CredentialRef: "env:HOOK_TOKEN",
		Settings: json.RawMessage(`{"url":"https://example.org/hook"}`)}, ledger.Actor{Name: "user:alice", Reason: "the hook"}))
	require.ErrorIs(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "acct.two", Platform: "webhook"}, ledger.Actor{Name: "user:alice", Reason: "again"}), ledger.ErrAccountExists)
	var rej *identity.RejectError
	require.ErrorAs(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "bad\u0007id", Platform: "sim"}, ledger.Actor{Name: "user:alice", Reason: ""}), &rej)
	require.Error(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "no-platform"}, ledger.Actor{Name: "user:alice", Reason: ""}))
	require.Error(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "bad-settings", Platform: "sim", Settings: json.RawMessage(`[1]`)}, ledger.Actor{Name: "user:alice", Reason: ""}))
	require.Error(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "null-settings", Platform: "sim", Settings: json.RawMessage(`null`)}, ledger.Actor{Name: "user:alice", Reason: ""}))
	require.Error(t, e.l.AddAccount(e.ctx, ledger.Account{ID: "nobody", Platform: "sim"}, ledger.Actor{Name: " ", Reason: ""}), "a change names its operator")

	accounts, err := e.l.Accounts(e.ctx)
	require.NoError(t, err)
	require.Len(t, accounts, 2) // acct-1 from the env, and acct.two
	require.Equal(t, "acct.two", accounts[1].ID)
	require.Equal(t, int64(1), accounts[1].CredentialVersion)
	require.False(t, accounts[1].Disabled)
	require.JSONEq(t, `{"url":"https://example.org/hook"}`, string(accounts[1].Settings))
	one, err := e.l.Account(e.ctx, "acct.two")
	require.NoError(t, err)
	require.Equal(t, accounts[1], one)
	_, err = e.l.Account(e.ctx, "acct-nobody")
	require.ErrorIs(t, err, ledger.ErrUnknownAccount)

	// The add is in the control history, once: the refused ones left nothing.
	rows, err := e.l.ControlHistory(e.ctx, "account", 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "acct.two", rows[0].Scope)
	require.Equal(t, "user:alice", rows[0].Actor)
	require.Equal(t, "the hook", rows[0].Reason)
	require.JSONEq(t, `null`, string(rows[0].Before))
	require.JSONEq(t, `{"platform":"webhook","settings":{"url":"https://example.org/hook"},"credential_ref":"env:HOOK_TOKEN",
		"credential_version":1,"revoked":false,"disabled":false,"contract_version":""}`, string(rows[0].After))
}

// Every change of an account writes one control_history row with its operator and reason, in
// the statement that makes it: the rows chain, each before the after of the one before it.
func TestEveryAccountChangeIsRecordedWithItsOperator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const id = "acct-life"
	require.NoError(t, e.l.AddAccount(e.ctx, ledger.Account{ID: id, Platform: "sim", Settings: json.RawMessage(`{"url":"http://127.0.0.1:1"}`)}, ledger.Actor{Name: "op:add", Reason: "new"}))
	settings, pin := json.RawMessage(`{"url":"http://127.0.0.1:2"}`), "sim/1"
	ch, err := e.l.UpdateAccount(e.ctx, id, ledger.AccountUpdate{Settings: settings, ContractVersion: &pin}, ledger.Actor{Name: "op:update", Reason: "moved"})
	require.NoError(t, err)
	require.JSONEq(t, `{"url":"http://127.0.0.1:1"}`, string(ch.Before.Settings))
	require.JSONEq(t, string(settings), string(ch.After.Settings))
	require.Equal(t, "sim/1", ch.After.ContractVersion)
	require.Equal(t, int64(2), ch.After.CredentialVersion, "new settings are a new version of what the adapter opens with")

	ch, err = e.l.UpdateAccount(e.ctx, id, ledger.AccountUpdate{Settings: json.RawMessage(`{ "url" : "http://127.0.0.1:2" }`)}, ledger.Actor{Name: "op:update", Reason: "same"})
	require.NoError(t, err)
	require.Equal(t, int64(2), ch.After.CredentialVersion, "the same settings (as JSON) are no new version")

	prev := ch
	ch, err = e.l.SetAccountDisabled(e.ctx, id, true, ledger.Actor{Name: "op:disable", Reason: "paused"})
	require.NoError(t, err)
	require.False(t, ch.Before.Disabled)
	require.True(t, prev.After.UpdatedAt.Equal(ch.Before.UpdatedAt), "before is the account as the previous change left it: %v, %v", prev.After.UpdatedAt, ch.Before.UpdatedAt)
	require.True(t, ch.After.Disabled)
	require.Equal(t, int64(2), ch.After.CredentialVersion, "disabling changes no credential")
	ch, err = e.l.SetAccountDisabled(e.ctx, id, false, ledger.Actor{Name: "op:enable", Reason: "resumed"})
	require.NoError(t, err)
	require.False(t, ch.After.Disabled)

	ch, err = e.l.RevokeCredential(e.ctx, id, ledger.Actor{Name: "op:revoke", Reason: "leaked"})
	require.NoError(t, err)
	require.True(t, ch.After.Revoked)
	require.Equal(t, int64(3), ch.After.CredentialVersion)
	ch, err = e.l.RotateCredential(e.ctx, id, "env:NEW", ledger.Actor{Name: "op:rotate", Reason: "new token"})
	require.NoError(t, err)
	require.False(t, ch.After.Revoked)
	require.Equal(t, "env:NEW", ch.After.CredentialRef)
	require.Equal(t, int64(4), ch.After.CredentialVersion)

	rows, err := e.l.ControlHistory(e.ctx, "account", 100)
	require.NoError(t, err)
	var actors []string
	for _, r := range rows {
		require.Equal(t, id, r.Scope)
		actors = append([]string{r.Actor + ": " + r.Reason}, actors...)
	}
	require.Equal(t, []string{"op:add: new", "op:update: moved", "op:update: same", "op:disable: paused", "op:enable: resumed",
		"op:revoke: leaked", "op:rotate: new token"}, actors)
	requireHistoryChains(t, e, "account")

	for name, change := range map[string]func() error{
		"update": func() error {
			_, err := e.l.UpdateAccount(e.ctx, "acct-nobody", ledger.AccountUpdate{ContractVersion: &pin}, ledger.Actor{Name: "op", Reason: "x"})
			return err
		},
		"disable": func() error {
			_, err := e.l.SetAccountDisabled(e.ctx, "acct-nobody", true, ledger.Actor{Name: "op", Reason: "x"})
			return err
		},
		"rotate": func() error {
			_, err := e.l.RotateCredential(e.ctx, "acct-nobody", "", ledger.Actor{Name: "op", Reason: "x"})
			return err
		},
		"revoke": func() error {
			_, err := e.l.RevokeCredential(e.ctx, "acct-nobody", ledger.Actor{Name: "op", Reason: "x"})
			return err
		},
	} {
		require.ErrorIs(t, change(), ledger.ErrUnknownAccount, name)
	}
	_, err = e.l.SetAccountDisabled(e.ctx, id, true, ledger.Actor{Name: "", Reason: "x"})
	require.Error(t, err, "a change names its operator")
	_, err = e.l.UpdateAccount(e.ctx, id, ledger.AccountUpdate{}, ledger.Actor{Name: "op", Reason: "x"})
	require.Error(t, err, "an update changes something")
	rows2, err := e.l.ControlHistory(e.ctx, "account", 100)
	require.NoError(t, err)
	require.Len(t, rows2, len(rows), "refused changes are not recorded")
}

// Rotating the credential refuses attempts opened with the old one; revoking refuses every
// authorization until the next rotation.
func TestRotateAndRevokeReachAuthorization(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.claim("opened before the rotation")
	ch, err := e.l.RotateCredential(e.ctx, account, "vault:acct-1/v2", ledger.Actor{Name: "op", Reason: "rotation"})
	require.NoError(t, err)
	require.Equal(t, int64(2), ch.After.CredentialVersion)
	a, err := e.l.Authorize(e.ctx, old, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonCredentialRotating, a.Reason)

	_, err = e.l.RevokeCredential(e.ctx, account, ledger.Actor{Name: "op", Reason: "leaked"})
	require.NoError(t, err)
	c := e.claim("after the revocation")
	a, err = e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonCredentialRevoked, a.Reason)

	_, err = e.l.RotateCredential(e.ctx, account, "", ledger.Actor{Name: "op", Reason: "new credential"})
	require.NoError(t, err)
	fresh := e.claim("after the new credential")
	a, err = e.l.Authorize(e.ctx, fresh, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "reason %s", a.Reason)
}

// A disabled account's intents are never authorized: Authorize refuses account_disabled
// (failed, nothing sent, the attempt not counted, always retried: they wait) until it is
// enabled again.
func TestADisabledAccountIsNeverAuthorized(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.claim("claimed before the disable")
	_, err := e.l.SetAccountDisabled(e.ctx, account, true, ledger.Actor{Name: "op", Reason: "paused"})
	require.NoError(t, err)
	for _, c := range []ledger.Claim{before, e.claim("claimed while disabled")} {
		a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		require.Equal(t, ledger.Failed, a.State)
		require.Equal(t, ledger.ReasonAccountDisabled, a.Reason)
		require.Zero(t, e.authorizedHistory(c.Key))
		require.Zero(t, e.intent(c.Key).AttemptsAuthorized)
	}
	rule, _ := ledger.ReasonAccountDisabled.Rule()
	require.Equal(t, ledger.RetryYes, rule.Retry, "a disabled account's intents wait: retried whatever the policy says")

	gates, err := e.l.Gates(e.ctx, []string{account})
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonAccountDisabled, gates[account].Refusal(), "the dispatcher's look before Begin sees it")

	_, err = e.l.SetAccountDisabled(e.ctx, account, false, ledger.Actor{Name: "op", Reason: "resumed"})
	require.NoError(t, err)
	a, err := e.l.Authorize(e.ctx, e.claim("after the enable"), inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "reason %s", a.Reason)
}

// New platform or settings wait while an intent of the account is authorized or indeterminate:
// its bytes may have left under the settings as they are, and its one lookup must ask there.
// Nothing changes and nothing is recorded. The pinned contract alone may change, and once the
// intents are settled the settings may too.
func TestAnAccountsAdapterIsNotChangedUnderAnIntentInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		make func(e *env) ledger.Claim
	}{
		{"authorized", func(e *env) ledger.Claim { return e.authorized("in flight") }},
		{"indeterminate", func(e *env) ledger.Claim { return e.indeterminate("unknown outcome") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c := tc.make(e)
			other, platformName := json.RawMessage(`{"url":"http://127.0.0.1:2"}`), "webhook"
			history := e.count(`SELECT count(*) FROM control_history`)
			for _, u := range []ledger.AccountUpdate{{Settings: other}, {Platform: &platformName}} {
				_, err := e.l.UpdateAccount(e.ctx, account, u, ledger.Actor{Name: "op", Reason: "moved"})
				require.ErrorIs(t, err, ledger.ErrAccountBusy)
			}
			a, err := e.l.Account(e.ctx, account)
			require.NoError(t, err)
			require.Equal(t, "sim", a.Platform)
			require.JSONEq(t, `{}`, string(a.Settings), "the refused update changed nothing")
			require.Equal(t, int64(1), a.CredentialVersion)
			require.Equal(t, history, e.count(`SELECT count(*) FROM control_history`), "nor was it recorded")

			pin := "sim/1"
			_, err = e.l.UpdateAccount(e.ctx, account, ledger.AccountUpdate{ContractVersion: &pin}, ledger.Actor{Name: "op", Reason: "pin"})
			require.NoError(t, err, "the pin does not change how the adapter opens")

			e.exec(`UPDATE intents SET state = 'parked', reason = 'operator_parked', lease_expires_at = NULL WHERE delivery_key = $1`, c.Key.Bytes())
			ch, err := e.l.UpdateAccount(e.ctx, account, ledger.AccountUpdate{Settings: other}, ledger.Actor{Name: "op", Reason: "moved"})
			require.NoError(t, err)
			require.JSONEq(t, string(other), string(ch.After.Settings))
		})
	}
}

// An attempt opened before the settings changed was prepared by the adapter as it was: it is
// refused at authorization, as after a rotation, and the next one goes through.
func TestAnAttemptOpenedBeforeNewSettingsIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.claim("prepared with the old settings")
	_, err := e.l.UpdateAccount(e.ctx, account, ledger.AccountUpdate{Settings: json.RawMessage(`{"url":"http://127.0.0.1:2"}`)}, ledger.Actor{Name: "op", Reason: "moved"})
	require.NoError(t, err)
	a, err := e.l.Authorize(e.ctx, old, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonCredentialRotating, a.Reason)
	a, err = e.l.Authorize(e.ctx, e.claim("prepared with the new settings"), inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "reason %s", a.Reason)
}

// Holds names the gate that holds an account and the operator change that set it, in the order
// Authorize checks them; an account no gate holds is absent.
func TestHoldsNameTheGateAndWhoSetIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, id := range []string{"acct-d", "acct-r", "acct-ok"} {
		require.NoError(t, e.l.AddAccount(e.ctx, ledger.Account{ID: id, Platform: "sim"}, ledger.Actor{Name: "op", Reason: "new"}))
	}
	_, err := e.l.SetAccountDisabled(e.ctx, "acct-d", true, ledger.Actor{Name: "alice", Reason: "first pause"})
	require.NoError(t, err)
	_, err = e.l.SetAccountDisabled(e.ctx, "acct-d", false, ledger.Actor{Name: "alice", Reason: "resumed"})
	require.NoError(t, err)
	_, err = e.l.SetAccountDisabled(e.ctx, "acct-d", true, ledger.Actor{Name: "bob", Reason: "second pause"})
	require.NoError(t, err)
	_, err = e.l.SetAccountDisabled(e.ctx, "acct-d", true, ledger.Actor{Name: "carol", Reason: "still paused"})
	require.NoError(t, err)
	_, err = e.l.RevokeCredential(e.ctx, "acct-r", ledger.Actor{Name: "dave", Reason: "leaked"})
	require.NoError(t, err)
	e.exec(`UPDATE accounts SET revoked = true WHERE account_id = $1`, account) // before changes were recorded

	holds, err := e.l.Holds(e.ctx, nil)
	require.NoError(t, err)
	require.Len(t, holds, 3)
	d := holds["acct-d"]
	require.Equal(t, ledger.ReasonAccountDisabled, d.Reason)
	require.Equal(t, "bob", d.By, "since the change that disabled it, not the one that said so again")
	require.Equal(t, "second pause", d.Why)
	require.NotNil(t, d.Since)
	r := holds["acct-r"]
	require.Equal(t, ledger.ReasonCredentialRevoked, r.Reason)
	require.Equal(t, "dave", r.By)
	require.Nil(t, holds[account].Since, "no record of who revoked it")
	require.Equal(t, ledger.ReasonCredentialRevoked, holds[account].Reason)

	_, err = e.l.SetSwitch(e.ctx, "acct-d", true, ledger.Actor{Name: "erin", Reason: "noisy"})
	require.NoError(t, err)
	holds, err = e.l.Holds(e.ctx, []string{"acct-d", "acct-ok"})
	require.NoError(t, err)
	require.Len(t, holds, 1)
	require.Equal(t, ledger.Hold{Reason: ledger.ReasonKillSwitch, Scope: "acct-d", By: "erin", Why: "noisy", Since: holds["acct-d"].Since}, holds["acct-d"])

	_, err = e.l.SetSwitch(e.ctx, ledger.GlobalScope, true, ledger.Actor{Name: "frank", Reason: "incident"})
	require.NoError(t, err)
	holds, err = e.l.Holds(e.ctx, []string{"acct-ok", "acct-d"})
	require.NoError(t, err)
	require.Equal(t, "frank", holds["acct-ok"].By)
	require.Equal(t, ledger.GlobalScope, holds["acct-ok"].Scope)
	require.Equal(t, "erin", holds["acct-d"].By, "the account's own switch first")
}

func TestPendingCountsCountEachAccountsPendingIntents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 3 {
		e.submit(fmt.Sprintf("pending %d", i))
	}
	e.authorized("not pending")
	counts, err := e.l.PendingCounts(e.ctx, []string{account, "acct-nobody"})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{account: 3}, counts)
}

// Two operators changing one account at once: the second change is made on top of the first,
// and the history records as its before exactly what the first left, at both isolation levels.
func TestConcurrentAccountChangesChainInTheHistory(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		const id = "acct-two-ops"
		require.NoError(t, e.l.AddAccount(e.ctx, ledger.Account{ID: id, Platform: "sim"}, ledger.Actor{Name: "op", Reason: "new"}))
		pin := "sim/1"
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			_, err := l.SetAccountDisabled(e.ctx, id, true, ledger.Actor{Name: "user:alice", Reason: "maintenance"})
			return err
		}, func() error {
			_, err := e.l.UpdateAccount(e.ctx, id, ledger.AccountUpdate{ContractVersion: &pin}, ledger.Actor{Name: "user:bob", Reason: "pin"})
			return err
		})
		require.NoError(t, firstErr)
		require.NoError(t, secondErr)
		a, err := e.l.Account(e.ctx, id)
		require.NoError(t, err)
		require.True(t, a.Disabled, "bob's change did not undo alice's")
		require.Equal(t, "sim/1", a.ContractVersion)
		requireHistoryChains(t, e, "account")
	})
}

// Two operators adding one account at once: one adds it, the other is told it exists, and the
// history holds one add.
func TestConcurrentAddsOfOneAccountRecordOne(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		add := func(l *ledger.Ledger, who string) error {
			return l.AddAccount(e.ctx, ledger.Account{ID: "acct-race", Platform: "sim", Settings: json.RawMessage(`{"url":"http://127.0.0.1:1"}`)}, ledger.Actor{Name: who, Reason: "new"})
		}
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error { return add(l, "user:alice") }, func() error { return add(e.l, "user:bob") })
		require.NoError(t, firstErr)
		require.ErrorIs(t, secondErr, ledger.ErrAccountExists)
		rows, err := e.l.ControlHistory(e.ctx, "account", 10)
		require.NoError(t, err)
		require.Len(t, rows, 1)
		require.Equal(t, "user:alice", rows[0].Actor)
	})
}
