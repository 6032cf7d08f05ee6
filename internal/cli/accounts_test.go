package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// accountsEnv is one test's ledger without accounts, and the operator named by the environment.
func accountsEnv(t *testing.T) (*dbtest.DB, map[string]string) {
	t.Helper()
	db := dbtest.New(t)
	return db, map[string]string{"ATMOST_DATABASE_URL": db.URL, "ATMOST_OPERATOR": "alice"}
}

// accountsState is what a refused account command must leave as it was: every account and
// the control history.
func accountsState(t *testing.T, db *dbtest.DB) string {
	t.Helper()
	var state string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT concat_ws(' | ',
		(SELECT string_agg(to_jsonb(a)::TEXT, ',' ORDER BY account_id) FROM accounts a),
		(SELECT count(*)::TEXT FROM control_history))`).Scan(&state))
	return state
}

const hookURL = `{"url":"https://example.org/hook","confirm":"response"}`

// An account the adapter would refuse is refused at the door, with the adapter's own message,
// and nothing is stored: an unknown platform, an unknown setting, a required one missing, a
// malformed credential reference, a credential the adapter cannot use.
func TestAccountsAddRefusesWhatTheAdapterRefuses(t *testing.T) {
	t.Parallel()
	db, env := accountsEnv(t)
	env["HOOK_EMPTY"] = ""
	empty := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	before := accountsState(t, db)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown platform", []string{"--platform", "nosuch"}, `platform "nosuch": platform: no adapter for this platform (have bluesky, email, matrix, sim, webhook)`},
		{"unknown setting", []string{"--platform", "webhook", "--settings", `{"urll":"https://example.org"}`}, `unknown field "urll"`},
		{"webhook without url", []string{"--platform", "webhook"}, "url is required"},
		{"webhook that can confirm nothing", []string{"--platform", "webhook", "--settings", `{"url":"https://example.org/hook"}`},
			`nothing confirms a success: set one of readback_url (the object is read back by id and its text compared), status_url (the delivery key is looked up after reconcile_delay) or "confirm": "response"`},
		{"sim without url", []string{"--platform", "sim", "--settings", `{}`}, "url is required"},
		{"bluesky without settings", []string{"--platform", "bluesky", "--credential-ref", "env:HOOK_EMPTY"}, "pds and identifier are required"},
		{"bluesky without credential", []string{"--platform", "bluesky", "--settings", `{"pds":"https://bsky.social","identifier":"did:plc:abc"}`}, "no credential reference"},
		{"settings not an object", []string{"--platform", "webhook", "--settings", `[1]`}, "webhook"},
		{"malformed reference", []string{"--platform", "webhook", "--settings", `{"url":"https://example.org","confirm":"response","credential_header":"Authorization"}`, "--credential-ref", "vault:hook"},
			`malformed credential reference "vault:hook": must be env:NAME or file:/path`},
		{"reference without header", []string{"--platform", "webhook", "--settings", hookURL, "--credential-ref", "env:HOOK_TOKEN"}, "credential_header is not set"},
		{"empty variable", []string{"--platform", "webhook", "--settings", `{"url":"https://example.org","confirm":"response","credential_header":"Authorization"}`, "--credential-ref", "env:HOOK_EMPTY"},
			"the credential env:HOOK_EMPTY names is empty"},
		{"empty file", []string{"--platform", "webhook", "--settings", `{"url":"https://example.org","confirm":"response","credential_header":"Authorization"}`, "--credential-ref", "file:" + empty},
			"names is empty"},
	} {
		res := run(env, append([]string{"accounts", "add", "acct-bad", "--reason", "try"}, tc.args...)...)
		require.Equal(t, cli.ExitError, res.code, "%s: %s", tc.name, res.stdout)
		require.Contains(t, res.stderr, tc.want, tc.name)
		require.Contains(t, res.stderr, "nothing was stored", tc.name)
		require.Equal(t, before, accountsState(t, db), "%s: nothing stored, nothing recorded", tc.name)
	}
	res := run(env, "accounts", "add", "acct-bad", "--reason", "try")
	require.Equal(t, cli.ExitUsage, res.code)
	require.Contains(t, res.stderr, "--platform is required")
	res = run(env, "accounts", "add", "acct-bad", "--platform", "sim", "--settings", `{"url":"http://127.0.0.1:1"}`)
	require.Equal(t, cli.ExitUsage, res.code, "a change says why")
	require.Contains(t, res.stderr, "--reason is required")
	require.Equal(t, before, accountsState(t, db))
}

// A credential the reference names here is checked and never printed; one that cannot be read
// here is no refusal (the roles read it in their own environment), and the command says so.
func TestAccountsAddChecksTheCredentialWhereItCanBeRead(t *testing.T) {
	t.Parallel()
	_, env := accountsEnv(t)
	const secret = "s3cr3t-t0ken-value"
	env["HOOK_TOKEN"] = secret
	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte(secret+"\n"), 0o600))
	withHeader := `{"url":"https://example.org","confirm":"response","credential_header":"Authorization","credential_prefix":"Bearer "}`

	for _, tc := range []struct {
		account, ref, note string
	}{
		{"acct-env", "env:HOOK_TOKEN", ""},
		{"acct-file", "file:" + file, ""},
		{"acct-elsewhere", "env:HOOK_ON_THE_DISPATCHER", "note: credential env:HOOK_ON_THE_DISPATCHER: environment variable HOOK_ON_THE_DISPATCHER is not set here; the roles that serve the account must be able to read it"},
		{"acct-nofile", "file:/nonexistent/token", "file /nonexistent/token cannot be read here: no such file or directory"},
	} {
		res := run(env, "accounts", "add", tc.account, "--platform", "webhook", "--settings", withHeader, "--credential-ref", tc.ref, "--reason", "new hook")
		require.Equal(t, cli.ExitOK, res.code, "%s: %s", tc.account, res.stderr)
		require.Contains(t, res.stdout, "account "+tc.account+" added (platform webhook, credential version 1) by alice: new hook")
		if tc.note == "" {
			require.Empty(t, res.stderr, tc.account)
		} else {
			require.Contains(t, res.stderr, tc.note, tc.account)
		}
		show := run(env, "accounts", "show", tc.account)
		require.Equal(t, cli.ExitOK, show.code, show.stderr)
		for _, out := range []string{res.stdout, res.stderr, show.stdout, show.stderr} {
			require.NotContains(t, out, secret, "the credential is never printed")
		}
	}
	show := run(env, "accounts", "show", "acct-env")
	require.Contains(t, show.stdout, "env:HOOK_TOKEN (version 1), readable here")
	show = run(env, "accounts", "show", "acct-elsewhere")
	require.Contains(t, show.stdout, "environment variable HOOK_ON_THE_DISPATCHER is not set here")
	require.Contains(t, show.stdout, "adapter     opens (nothing sent)")
}

// The lifecycle: show, update (checked as add is), disable, enable, rotate, revoke, each with
// its operator and reason in the control history, read back by atmost controls log.
func TestAccountsLifecycleIsWrittenToTheControlsLog(t *testing.T) {
	t.Parallel()
	db, env := accountsEnv(t)
	res := run(env, "accounts", "add", "acct-b", "--platform", "webhook", "--settings", hookURL, "--reason", "new hook")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)

	res = run(env, "accounts", "show", "acct-b")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	for _, want := range []string{"account     acct-b", "platform    webhook", `settings    {"url":"https://example.org/hook","confirm":"response"}`,
		"credential  - (version 1)", "state       enabled", "adapter     opens (nothing sent)", "pending     0 intents"} {
		require.Contains(t, res.stdout, want)
	}
	require.NotContains(t, res.stdout, "held")

	// update is checked as add is: a refusal changes nothing.
	before := accountsState(t, db)
	res = run(env, "accounts", "update", "acct-b", "--settings", `{"urll":"https://example.org/new"}`, "--reason", "typo")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, `unknown field "urll"`)
	res = run(env, "accounts", "update", "acct-b", "--platform", "nosuch", "--reason", "typo")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, "no adapter for this platform")
	res = run(env, "accounts", "update", "acct-b", "--reason", "nothing")
	require.Equal(t, cli.ExitUsage, res.code)
	require.Contains(t, res.stderr, "give what to change")
	res = run(env, "accounts", "update", "acct-b", "--credential-ref", "env:X", "--reason", "not here")
	require.Equal(t, cli.ExitUsage, res.code)
	require.Contains(t, res.stderr, "--credential-ref: not a flag of update")
	require.Equal(t, before, accountsState(t, db))

	for _, step := range []struct {
		args []string
		out  string
	}{
		{[]string{"update", "acct-b", "--settings", `{"url":"https://example.org/new","confirm":"response"}`, "--reason", "moved", "--operator", "bob"},
			`account acct-b updated (credential_version: 1 -> 2, settings: {"url":"https://example.org/hook","confirm":"response"} -> {"url":"https://example.org/new","confirm":"response"}) by bob: moved`},
		{[]string{"disable", "acct-b", "--reason", "maintenance"}, "account acct-b: enabled -> disabled by alice: maintenance"},
		{[]string{"enable", "acct-b", "--reason", "done"}, "account acct-b: disabled -> enabled by alice: done"},
		{[]string{"revoke", "acct-b", "--reason", "leaked"}, "account acct-b: revoked (credential version 3) by alice: leaked; rotate to use it again"},
		{[]string{"rotate", "acct-b", "--reason", "new token"}, "account acct-b: credential -, version 4 by alice: new token"},
	} {
		res := run(env, append([]string{"accounts"}, step.args...)...)
		require.Equal(t, cli.ExitOK, res.code, "%v: %s", step.args, res.stderr)
		require.Equal(t, step.out+"\n", res.stdout)
	}

	res = run(env, "controls", "log", "--kind", "account")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Len(t, lines, 7, res.stdout) // the header, the add and five changes
	for i, want := range []string{
		`account\s+acct-b\s+alice\s+credential_version: 3 -> 4, revoked: true -> false\s+new token`,
		`account\s+acct-b\s+alice\s+credential_version: 2 -> 3, revoked: false -> true\s+leaked`,
		`account\s+acct-b\s+alice\s+disabled: true -> false\s+done`,
		`account\s+acct-b\s+alice\s+disabled: false -> true\s+maintenance`,
		`account\s+acct-b\s+bob\s+credential_version: 1 -> 2, settings: \{"url":"https://example.org/hook","confirm":"response"\} -> \{"url":"https://example.org/new","confirm":"response"\}\s+moved`,
		`account\s+acct-b\s+alice\s+added: .*platform: "webhook".*\s+new hook`,
	} {
		require.Regexp(t, want, lines[i+1])
	}

	res = run(env, "accounts", "disable", "acct-b", "--reason", "again", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var change struct {
		Before struct{ Disabled bool } `json:"before"`
		After  struct {
			Account  string `json:"account"`
			Disabled bool   `json:"disabled"`
		} `json:"after"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &change))
	require.Equal(t, "acct-b", change.After.Account)
	require.False(t, change.Before.Disabled)
	require.True(t, change.After.Disabled)

	res = run(env, "accounts", "ls", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var accounts []map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &accounts))
	require.Len(t, accounts, 1)
	require.Equal(t, "acct-b", accounts[0]["account"], "snake_case keys, as everywhere")
	require.Equal(t, true, accounts[0]["disabled"])
	require.EqualValues(t, 4, accounts[0]["credential_version"])
	res = run(env, "accounts", "ls")
	require.Regexp(t, `acct-b\s+webhook\s+disabled\s+serving\s+-\s+4\s+-\s+account_disabled`, res.stdout)

	for _, sub := range []string{"show", "update", "disable", "enable", "rotate", "revoke"} {
		res := run(env, "accounts", sub, "acct-nobody", "--reason", "x", "--contract-version", "v")
		if sub != "update" {
			res = run(env, "accounts", sub, "acct-nobody", "--reason", "x")
		}
		if sub == "show" {
			res = run(env, "accounts", sub, "acct-nobody")
		}
		require.Equal(t, cli.ExitError, res.code, sub)
		require.Contains(t, res.stderr, "unknown account", sub)
	}
	for _, sub := range []string{"disable", "enable", "rotate", "revoke"} {
		res := run(env, "accounts", sub, "acct-b")
		require.Equal(t, cli.ExitUsage, res.code, sub)
		require.Contains(t, res.stderr, "--reason is required", sub)
		res = run(env, "accounts", sub, "--reason", "x")
		require.Equal(t, cli.ExitUsage, res.code, sub)
		require.Contains(t, res.stderr, "give the ACCOUNT", sub)
	}
	require.Equal(t, cli.ExitUsage, run(env, "accounts").code)
	require.Equal(t, cli.ExitUsage, run(env, "accounts", "rm", "acct-b").code)
}

// rotate is checked as add is: a reference the adapter cannot take is refused.
func TestAccountsRotateChecksTheNewReference(t *testing.T) {
	t.Parallel()
	db, env := accountsEnv(t)
	res := run(env, "accounts", "add", "acct-b", "--platform", "webhook", "--settings", hookURL, "--reason", "new hook")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	before := accountsState(t, db)
	res = run(env, "accounts", "rotate", "acct-b", "--credential-ref", "env:HOOK_TOKEN", "--reason", "a token")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, "credential_header is not set", "the webhook sends a credential only in the header its settings name")
	res = run(env, "accounts", "rotate", "acct-b", "--credential-ref", "vault:x", "--reason", "a token")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, "must be env:NAME or file:/path")
	require.Equal(t, before, accountsState(t, db))
}

// A pending intent whose account cannot be served says why in intents show: the gate that
// holds it, who set it, when and why; or the adapter's refusal for a row stored before
// accounts were checked at the door. Once the account is served again, the line is gone.
func TestIntentsShowSaysWhyAnIntentWaits(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	key := s.submit("waits for its account").String()
	res := s.run("intents", "show", key)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.NotContains(t, res.stdout, "waiting")

	res = s.run("accounts", "disable", "acct-1", "--reason", "moving it", "--operator", "bob")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	res = s.run("intents", "show", key)
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `\nwaiting\s+account acct-1 is disabled since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ, by bob, reason: moving it\n`, res.stdout)
	res = s.run("intents", "show", key, "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var rec struct {
		Waiting *struct{ Cause, Why string } `json:"waiting"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &rec))
	require.NotNil(t, rec.Waiting)
	require.Equal(t, "account_disabled", rec.Waiting.Cause)
	require.Contains(t, rec.Waiting.Why, "by bob, reason: moving it")
	res = s.run("accounts", "show", "acct-1")
	require.Regexp(t, `\nheld\s+account acct-1 is disabled since \S+, by bob, reason: moving it: its pending intents wait\n`, res.stdout)
	require.Contains(t, res.stdout, "pending     1 intents")

	res = s.run("switch", "on", "--reason", "incident 7", "--operator", "carol")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	res = s.run("intents", "show", key)
	require.Contains(t, res.stdout, "the global kill switch is on since", "the kill switch is checked first, as Authorize does")
	require.Contains(t, res.stdout, "by carol, reason: incident 7")
	require.Equal(t, cli.ExitOK, s.run("switch", "off", "--reason", "over").code)
	require.Equal(t, cli.ExitOK, s.run("accounts", "enable", "acct-1", "--reason", "moved").code)
	require.NotContains(t, s.run("intents", "show", key).stdout, "waiting")

	res = s.run("accounts", "revoke", "acct-1", "--reason", "leaked", "--operator", "dave")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, s.run("intents", "show", key).stdout, "account acct-1's credential is revoked since")
	require.Equal(t, cli.ExitOK, s.run("accounts", "rotate", "acct-1", "--reason", "new").code)

	// A row stored before the door checked it, naming a platform this build does not have.
	s.exec(`UPDATE accounts SET platform = 'nosuch' WHERE account_id = 'acct-1'`)
	res = s.run("intents", "show", key)
	require.Contains(t, res.stdout, `waiting   account acct-1 cannot be served: its platform adapter does not open: account "acct-1": platform "nosuch": platform: no adapter for this platform`)
	res = s.run("accounts", "show", "acct-1")
	require.Contains(t, res.stdout, "adapter     does not open")
	require.Contains(t, res.stdout, "pending     1 intents")
	res = s.run("accounts", "update", "acct-1", "--platform", "sim", "--reason", "fix the old row")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.NotContains(t, s.run("intents", "show", key).stdout, "waiting")
}

// An account its health holds shows it (state, cause, since, what ends it) in accounts show
// and ls, and accounts resume, with an operator and a reason, serves it again, once: the change
// is in the control history.
func TestAccountsResumeServesAHoldingAccount(t *testing.T) {
	t.Parallel()
	db, env := accountsEnv(t)
	res := run(env, "accounts", "add", "acct-h", "--platform", "webhook", "--settings", hookURL, "--reason", "new hook")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO account_health (account_id, state, cause) VALUES ('acct-h', 'holding', 'auth_failed')`)
	require.NoError(t, err)

	res = run(env, "accounts", "show", "acct-h")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `health\s+holding \(auth_failed\) since \S+, no probe: atmost accounts resume acct-h ends it`, res.stdout)
	require.Regexp(t, `held\s+account acct-h is holding \(auth_failed\) since \S+, no probe`, res.stdout)
	res = run(env, "accounts", "ls")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `acct-h\s+webhook\s+enabled\s+holding \(auth_failed\)`, res.stdout)
	res = run(env, "accounts", "show", "acct-h", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var shown struct {
		Health struct {
			State     string  `json:"state"`
			Cause     string  `json:"cause"`
			NextProbe *string `json:"next_probe"`
		} `json:"health"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &shown))
	require.Equal(t, "holding", shown.Health.State)
	require.Equal(t, "auth_failed", shown.Health.Cause)
	require.Nil(t, shown.Health.NextProbe)

	before := accountsState(t, db)
	res = run(env, "accounts", "resume", "acct-h")
	require.Equal(t, cli.ExitUsage, res.code)
	require.Contains(t, res.stderr, "--reason is required")
	require.Equal(t, before, accountsState(t, db))

	res = run(env, "accounts", "resume", "acct-h", "--reason", "rotated the token")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, "account acct-h: holding (auth_failed) -> serving by alice: rotated the token\n", res.stdout)
	res = run(env, "accounts", "resume", "acct-h", "--reason", "again")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, "account acct-h is serving: nothing to resume")
	res = run(env, "accounts", "show", "acct-h")
	require.Regexp(t, `health\s+serving\n`, res.stdout)

	res = run(env, "controls", "log", "--kind", "health")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `health\s+acct-h\s+alice\s+.*rotated the token`, res.stdout)
}
