package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// controlEnv is one test's ledger with one configured account, and the operator named by the
// environment as an operator's shell would.
func controlEnv(t *testing.T) (*dbtest.DB, map[string]string) {
	t.Helper()
	db := dbtest.New(t)
	env := map[string]string{"ATMOST_DATABASE_URL": db.URL, "ATMOST_OPERATOR": "alice"}
	res := run(env, "accounts", "add", "acct-1", "--platform", "sim", "--settings", `{"url":"http://127.0.0.1:1"}`, "--reason", "the test's account")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	return db, env
}

// historyRow is one control_history row as the owner reads it. controlHistory leaves out the
// account changes (accounts_test.go looks at those): every scene starts with one.
type historyRow struct {
	Kind, Scope, Actor, Reason string
	Before, After              *string
}

func controlHistory(t *testing.T, db *dbtest.DB) []historyRow {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT kind, scope, actor, reason, before::TEXT, after::TEXT FROM control_history WHERE kind <> 'account' ORDER BY at, control_id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []historyRow
	for rows.Next() {
		var r historyRow
		require.NoError(t, rows.Scan(&r.Kind, &r.Scope, &r.Actor, &r.Reason, &r.Before, &r.After))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// schemaState is what a refused command must leave as it was: every control and its history.
func schemaState(t *testing.T, db *dbtest.DB) string {
	t.Helper()
	var state string
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT concat_ws(' | ',
		(SELECT string_agg(scope || engaged::TEXT || reason || actor, ',' ORDER BY scope) FROM switches),
		(SELECT string_agg(to_jsonb(p)::TEXT, ',' ORDER BY scope) FROM policies p),
		(SELECT max(epoch)::TEXT FROM epochs),
		(SELECT count(*)::TEXT FROM control_history))`).Scan(&state))
	return state
}

func TestSwitchOnOffListsAndRecordsTheOperator(t *testing.T) {
	t.Parallel()
	db, env := controlEnv(t)

	res := run(env, "switch", "ls")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "global  off (never set)")

	res = run(env, "switch", "on", "--reason", "incident 42")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, "global switch: off (never set) -> on (by alice: incident 42)\n", res.stdout)
	res = run(env, "switch", "on", "--account", "acct-1", "--reason", "noisy", "--operator", "bob")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "acct-1 switch: off (never set) -> on (by bob: noisy)")
	res = run(env, "switch", "off", "--reason", "resolved", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var change struct {
		Before *struct{ Engaged bool }
		After  struct {
			Scope   string
			Engaged bool
			Actor   string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &change))
	require.NotNil(t, change.Before)
	require.True(t, change.Before.Engaged)
	require.False(t, change.After.Engaged)
	require.Equal(t, "alice", change.After.Actor)

	res = run(env, "switch", "ls", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var switches []struct {
		Scope   string
		Engaged bool
		Actor   string
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &switches))
	require.Len(t, switches, 2)
	require.Equal(t, "", switches[0].Scope, "the global switch first")
	require.False(t, switches[0].Engaged)
	require.Equal(t, "acct-1", switches[1].Scope)
	require.True(t, switches[1].Engaged)
	require.Equal(t, "bob", switches[1].Actor)

	history := controlHistory(t, db)
	require.Len(t, history, 3, "one row per change")
	require.Equal(t, historyRow{"switch", "", "alice", "incident 42", nil, ptr(`{"reason": "incident 42", "engaged": true}`)}, history[0])
	require.Equal(t, historyRow{"switch", "acct-1", "bob", "noisy", nil, ptr(`{"reason": "noisy", "engaged": true}`)}, history[1])
	require.Equal(t, historyRow{"switch", "", "alice", "resolved", ptr(`{"reason": "incident 42", "engaged": true}`), ptr(`{"reason": "resolved", "engaged": false}`)}, history[2])
}

func TestPolicySetChangesOnlyTheGivenFields(t *testing.T) {
	t.Parallel()
	db, env := controlEnv(t)

	res := run(env, "policy", "set", "--account", "acct-1", "--attempt-cap", "5", "--rate-burst", "4", "--reason", "flaky platform")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, "acct-1 policy (by alice: flaky platform):\n  attempt-cap: inherit -> 5\n  rate-burst: inherit -> 4\n", res.stdout)
	res = run(env, "policy", "set", "--account", "acct-1", "--text-window", "1h", "--retryable", "connection_failed, kill_switch", "--inherit", "rate-burst", "--reason", "tighter")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "rate-burst: 4 -> inherit")
	require.Contains(t, res.stdout, "text-window: inherit -> 1h0m0s")
	require.Contains(t, res.stdout, "retryable: inherit -> connection_failed,kill_switch")
	require.NotContains(t, res.stdout, "attempt-cap", "an untouched field is not reported")

	res = run(env, "policy", "get", "--account", "acct-1", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var got struct {
		Scope      string
		Overridden []string
		Effective  struct {
			AttemptCap        int      `json:"attempt_cap"`
			RateBurst         int      `json:"rate_burst"`
			TextWindowSeconds int      `json:"text_window_seconds"`
			RetryableReasons  []string `json:"retryable_reasons"`
		}
		Override *struct {
			AttemptCap *int `json:"attempt_cap"`
			RateBurst  *int `json:"rate_burst"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	require.Equal(t, "acct-1", got.Scope)
	require.Equal(t, []string{"attempt_cap", "text_window", "retryable_reasons"}, got.Overridden)
	require.Equal(t, 5, got.Effective.AttemptCap, "kept from the first change")
	require.Equal(t, 10, got.Effective.RateBurst, "inherited from the default again")
	require.Equal(t, 3600, got.Effective.TextWindowSeconds)
	require.Equal(t, []string{"connection_failed", "kill_switch"}, got.Effective.RetryableReasons)
	require.NotNil(t, got.Override)
	require.Nil(t, got.Override.RateBurst)

	res = run(env, "policy", "get", "--account", "acct-1")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `attempt-cap\s+5\s+account\s+3`, res.stdout)
	require.Regexp(t, `rate-burst\s+10\s+default\s+10`, res.stdout)

	// The default: one field changes, every other one stays set.
	res = run(env, "policy", "set", "--backoff-base", "2s", "--reason", "faster first retry", "--operator", "bob")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, "default policy (by bob: faster first retry):\n  backoff-base: 5s -> 2s\n", res.stdout)
	res = run(env, "policy", "get")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `backoff-base\s+2s`, res.stdout)
	require.Regexp(t, `attempt-cap\s+3`, res.stdout)
	require.Contains(t, res.stdout, "acct-1 overrides: attempt-cap, text-window, retryable")

	history := controlHistory(t, db)
	require.Len(t, history, 3)
	require.Equal(t, "policy", history[0].Kind)
	require.Nil(t, history[0].Before, "acct-1 had no policy row")
	require.JSONEq(t, `{"attempt_cap": 5, "backoff_base_ms": null, "backoff_max_ms": null, "rate_per_minute": null, "rate_burst": 4,
		"text_window_seconds": null, "retryable_reasons": null, "trip_failures": null, "trip_unknowns": null, "trip_window_seconds": null, "probe_base_ms": null, "probe_max_ms": null, "backoff_factor": null}`, *history[0].After)
	require.JSONEq(t, *history[0].After, *history[1].Before, "each change's before is the previous one's after")
	require.JSONEq(t, `{"attempt_cap": 5, "backoff_base_ms": null, "backoff_max_ms": null, "rate_per_minute": null, "rate_burst": null,
		"text_window_seconds": 3600, "retryable_reasons": ["connection_failed", "kill_switch"], "trip_failures": null, "trip_unknowns": null, "trip_window_seconds": null, "probe_base_ms": null, "probe_max_ms": null, "backoff_factor": null}`, *history[1].After)
	require.Equal(t, historyRow{"policy", "", "bob", "faster first retry", history[2].Before, history[2].After}, history[2])
	require.Contains(t, *history[2].Before, `"backoff_base_ms": 5000`)
	require.Contains(t, *history[2].After, `"backoff_base_ms": 2000`)
}

// The health thresholds and the backoff factor are set, shown and inherited like every other
// policy field, and a value out of its range is a usage error that says the range.
func TestPolicySetTakesTheHealthFields(t *testing.T) {
	t.Parallel()
	db, env := controlEnv(t)

	res := run(env, "policy", "set", "--account", "acct-1", "--trip-failures", "5", "--trip-unknowns", "0", "--trip-window", "2m",
		"--probe-base", "1s", "--probe-max", "1m", "--backoff-factor", "1.5", "--reason", "a platform that stalls")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, "acct-1 policy (by alice: a platform that stalls):\n  backoff-factor: inherit -> 1.5\n  trip-failures: inherit -> 5\n"+
		"  trip-unknowns: inherit -> 0\n  trip-window: inherit -> 2m0s\n  probe-base: inherit -> 1s\n  probe-max: inherit -> 1m0s\n", res.stdout)
	res = run(env, "policy", "get", "--account", "acct-1")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `trip-failures\s+5\s+account\s+3`, res.stdout)
	require.Regexp(t, `backoff-factor\s+1\.5\s+account\s+2`, res.stdout)
	require.Regexp(t, `probe-max\s+1m0s\s+account\s+30s`, res.stdout)
	res = run(env, "policy", "get", "--account", "acct-1", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var got struct {
		Effective struct {
			TripWindowSeconds int64   `json:"trip_window_seconds"`
			ProbeBaseMs       int64   `json:"probe_base_ms"`
			BackoffFactor     float64 `json:"backoff_factor"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &got))
	require.Equal(t, int64(120), got.Effective.TripWindowSeconds)
	require.Equal(t, int64(1000), got.Effective.ProbeBaseMs)
	require.InDelta(t, 1.5, got.Effective.BackoffFactor, 0)

	res = run(env, "policy", "set", "--account", "acct-1", "--inherit", "trip-failures,probe-max", "--reason", "back")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, "acct-1 policy (by alice: back):\n  trip-failures: 5 -> inherit\n  probe-max: 1m0s -> inherit\n", res.stdout)
	history := controlHistory(t, db)
	require.Len(t, history, 2)
	require.Contains(t, *history[1].Before, `"trip_failures": 5`)
	require.Contains(t, *history[1].After, `"trip_failures": null`)
	require.Contains(t, *history[1].After, `"backoff_factor": 1.5`)

	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--trip-failures", "0"}, "trip failures 0: it must be at least 1"},
		{[]string{"--trip-unknowns", "-1"}, "trip unknowns -1: it must be at least 0"},
		{[]string{"--trip-window", "0s"}, "trip window 0s: it must be a whole number of seconds, at least 1"},
		{[]string{"--probe-base", "0s"}, "probe base 0s: it must be a whole number of milliseconds, at least 1"},
		{[]string{"--backoff-factor", "0.5"}, "backoff factor 0.5: it must lie between 1 (a constant delay) and 10"},
		{[]string{"--backoff-factor", "11"}, "backoff factor 11: it must lie between 1"},
		{[]string{"--inherit", "probe-base"}, "--inherit probe-base: the default policy sets every field"},
	} {
		res = run(env, append(append([]string{"policy", "set"}, c.args...), "--reason", "bad")...)
		require.Equal(t, cli.ExitUsage, res.code, c.args)
		require.Contains(t, res.stderr, c.says)
	}
	require.Len(t, controlHistory(t, db), 2, "a refused change leaves no history")
}

func TestEpochShowAndBump(t *testing.T) {
	t.Parallel()
	db, env := controlEnv(t)
	res := run(env, "epoch", "show")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `(?m)^1\s+\S+\s+migration\s+schema created$`, res.stdout)

	res = run(env, "epoch", "bump", "--reason", "restored from backup")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Contains(t, res.stdout, "epoch: 1 -> 2 (by alice: restored from backup)")
	res = run(env, "epoch", "bump", "--reason", "again", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.JSONEq(t, `{"before": 2, "after": 3, "actor": "alice", "reason": "again"}`, res.stdout)

	res = run(env, "epoch", "show", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var shown struct {
		Epoch  int64
		Actor  string
		Reason string
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &shown))
	require.Equal(t, int64(3), shown.Epoch)
	require.Equal(t, "alice", shown.Actor)

	history := controlHistory(t, db)
	require.Len(t, history, 2)
	require.Equal(t, historyRow{"epoch", "", "alice", "restored from backup", ptr(`{"epoch": 1}`), ptr(`{"epoch": 2}`)}, history[0])
	require.Equal(t, historyRow{"epoch", "", "alice", "again", ptr(`{"epoch": 2}`), ptr(`{"epoch": 3}`)}, history[1])
}

func TestControlsLogReadsTheHistoryNewestFirst(t *testing.T) {
	t.Parallel()
	_, env := controlEnv(t)
	for _, args := range [][]string{
		{"switch", "on", "--account", "acct-1", "--reason", "noisy"},
		{"policy", "set", "--account", "acct-1", "--attempt-cap", "5", "--reason", "flaky"},
		{"epoch", "bump", "--reason", "restored"},
	} {
		res := run(env, args...)
		require.Equal(t, cli.ExitOK, res.code, "%v: %s", args, res.stderr)
	}
	res := run(env, "controls", "log")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	lines := bytes.Split(bytes.TrimSpace([]byte(res.stdout)), []byte("\n"))
	require.Len(t, lines, 5, res.stdout)
	require.Regexp(t, `epoch\s+-\s+alice\s+1 -> 2\s+restored`, string(lines[1]))
	require.Regexp(t, `policy\s+acct-1\s+alice\s+attempt_cap: inherit -> 5\s+flaky`, string(lines[2]))
	require.Regexp(t, `switch\s+acct-1\s+alice\s+off \(never set\) -> on\s+noisy`, string(lines[3]))
	require.Regexp(t, `account\s+acct-1\s+alice\s+added: contract_version: "", .*platform: "sim", .*settings: \{"url":"http://127.0.0.1:1"\}\s+the test's account`, string(lines[4]))

	res = run(env, "controls", "log", "--kind", "policy", "--limit", "5", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var changes []struct {
		Kind, Scope, Actor string
		Before             json.RawMessage
		After              json.RawMessage
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &changes))
	require.Len(t, changes, 1)
	require.Equal(t, "acct-1", changes[0].Scope)
	require.JSONEq(t, "null", string(changes[0].Before))

	res = run(env, "controls", "log", "--limit", "1", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &changes))
	require.Len(t, changes, 1)
	require.Equal(t, "epoch", changes[0].Kind)
}

// A bad command line exits 2, names the fix, and changes nothing in the ledger.
func TestBadControlCommandLinesExitWithUsageAndChangeNothing(t *testing.T) {
	t.Parallel()
	db, env := controlEnv(t)
	require.Equal(t, cli.ExitOK, run(env, "policy", "set", "--account", "acct-1", "--attempt-cap", "5", "--reason", "scene").code)
	before := schemaState(t, db)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"switch"}, "Usage:"},
		{[]string{"switch", "sideways"}, `unknown command "sideways"`},
		{[]string{"switch", "on"}, "--reason is required"},
		{[]string{"switch", "on", "--reason", "  "}, "--reason is required"},
		{[]string{"switch", "on", "--account", "", "--reason", "x"}, "--account is empty"},
		{[]string{"switch", "off", "acct-1", "--reason", "x"}, `unexpected argument "acct-1"`},
		{[]string{"switch", "ls", "--reason", "x"}, "--reason: not a flag of ls"},
		{[]string{"switch", "on", "--no-such-flag"}, "--no-such-flag: not a flag of on"},
		{[]string{"policy", "get", "--attempt-cap", "4"}, "--attempt-cap: not a flag of get"},
		{[]string{"policy", "set", "--reason", "x"}, "nothing to change"},
		{[]string{"policy", "set", "--attempt-cap", "0", "--reason", "x"}, "at least 1"},
		{[]string{"policy", "set", "--attempt-cap", "many", "--reason", "x"}, "invalid value"},
		{[]string{"policy", "set", "--rate-burst", "0", "--reason", "x"}, "at least 1"},
		{[]string{"policy", "set", "--rate-per-minute", "-1", "--reason", "x"}, "0 is unlimited"},
		{[]string{"policy", "set", "--backoff-base", "-1s", "--reason", "x"}, "non-negative"},
		{[]string{"policy", "set", "--backoff-max", "soon", "--reason", "x"}, "invalid value"},
		{[]string{"policy", "set", "--text-window", "1500ms", "--reason", "x"}, "whole number of seconds"},
		{[]string{"policy", "set", "--retryable", "send_unknown", "--reason", "x"}, "connection_failed, credential_revoked"},
		{[]string{"policy", "set", "--retryable", "", "--reason", "x"}, "say none"},
		{[]string{"policy", "set", "--retryable", "account_disabled", "--reason", "x"}, "account_disabled\" is retried always"},
		{[]string{"policy", "set", "--inherit", "attempt-cap", "--reason", "x"}, "the default policy sets every field"},
		{[]string{"policy", "set", "--account", "acct-1", "--inherit", "colour", "--reason", "x"}, "attempt-cap, backoff-base"},
		{[]string{"policy", "set", "--account", "acct-1", "--inherit", "attempt-cap", "--attempt-cap", "4", "--reason", "x"}, "contradict"},
		{[]string{"policy", "set", "--account", "acct-1", "--retryable", "none", "--inherit-retryable", "--reason", "x"}, "contradict"},
		{[]string{"policy", "set", "--account", "acct-1", "--attempt-cap", "4"}, "--reason is required"},
		{[]string{"epoch", "bump"}, "--reason is required"},
		{[]string{"epoch", "show", "now"}, "unexpected argument"},
		{[]string{"controls", "log", "--kind", "lever"}, "switch, policy, epoch"},
		{[]string{"controls", "log", "--limit", "0"}, "at least 1"},
	} {
		res := run(env, tc.args...)
		require.Equal(t, cli.ExitUsage, res.code, "atmost %q: %s", tc.args, res.stderr)
		require.Contains(t, res.stderr, tc.want, "atmost %q", tc.args)
	}
	require.Equal(t, before, schemaState(t, db), "no refused command changed anything")

	// An account that is not configured is refused by the ledger, with nothing written.
	res := run(env, "switch", "on", "--account", "acct-typo", "--reason", "x")
	require.Equal(t, cli.ExitError, res.code)
	require.Contains(t, res.stderr, "unknown account")
	require.Contains(t, res.stderr, "atmost accounts ls")
	res = run(env, "policy", "set", "--account", "acct-typo", "--attempt-cap", "4", "--reason", "x")
	require.Equal(t, cli.ExitError, res.code)
	res = run(env, "policy", "get", "--account", "acct-typo")
	require.Equal(t, cli.ExitError, res.code, "a read names a configured account as a change does")
	require.Contains(t, res.stderr, "unknown account")
	require.Contains(t, res.stderr, "atmost accounts ls")
	require.Empty(t, res.stdout)
	require.Equal(t, before, schemaState(t, db))
}

// Each subcommand's --help, on standard output, lists its own flags as --name and no flag of
// another subcommand: a read takes no --operator or --reason.
func TestHelpListsTheFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"switch", "on", "--help"}, {"switch", "off", "help"}, {"policy", "set", "--help"}, {"epoch", "bump", "--help"},
	} {
		res := run(nil, args...)
		require.Equal(t, cli.ExitOK, res.code, "atmost %v", args)
		require.Contains(t, res.stdout, "\n  --operator NAME\n", "atmost %v", args)
		require.Contains(t, res.stdout, "\n  --reason TEXT\n", "atmost %v", args)
		require.Contains(t, res.stdout, "\n  --json\n", "atmost %v", args)
	}
	for _, args := range [][]string{{"switch", "ls", "--help"}, {"policy", "get", "--help"}, {"epoch", "show", "--help"}, {"controls", "log", "-h"}} {
		res := run(nil, args...)
		require.Equal(t, cli.ExitOK, res.code, "atmost %v", args)
		require.Contains(t, res.stdout, "\n  --json\n", "atmost %v", args)
		require.NotContains(t, res.stdout, "--operator", "atmost %v: a read has no operator", args)
		require.NotContains(t, res.stdout, "--reason", "atmost %v: a read has no reason", args)
	}
	res := run(nil, "policy", "set", "--help")
	for _, flag := range []string{"--attempt-cap N", "--backoff-base D", "--backoff-max D", "--rate-per-minute N", "--rate-burst N", "--text-window D", "--retryable r1,r2|none", "--inherit-retryable", "--inherit FIELD,...", "--account A"} {
		require.Contains(t, res.stdout, "\n  "+flag+"\n")
	}
	res = run(nil, "policy", "get", "--help")
	require.NotContains(t, res.stdout, "--attempt-cap", "policy get sets nothing")
	res = run(nil, "switch", "--help")
	require.Equal(t, cli.ExitOK, res.code)
	for _, sub := range []string{"atmost switch ls", "atmost switch on", "atmost switch off"} {
		require.Contains(t, res.stdout, "\n  "+sub+" ", "a group's help has each subcommand's usage")
	}
	res = run(nil, "help")
	for _, name := range []string{"switch", "policy", "epoch", "controls", "ATMOST_OPERATOR"} {
		require.Contains(t, res.stdout, name)
	}
}

// The operator is --operator, else ATMOST_OPERATOR, else the OS user as user:NAME; with none
// of them a change is refused before it reaches the ledger.
func TestTheOperatorComesFromTheFlagTheEnvironmentOrTheOSUser(t *testing.T) {
	t.Parallel()
	db, env := controlEnv(t)
	delete(env, "ATMOST_OPERATOR")
	runAs := func(user func() (string, error), args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := cli.Run(context.Background(), cli.IO{Stdout: &stdout, Stderr: &stderr, User: user,
			Env: func(name string) (string, bool) { v, ok := env[name]; return v, ok }}, args)
		return code, stdout.String() + stderr.String()
	}
	carol := func() (string, error) { return "carol", nil }
	nobody := func() (string, error) { return "", errors.New("user: unknown userid 4242") }

	code, out := runAs(carol, "switch", "on", "--reason", "os user")
	require.Equal(t, cli.ExitOK, code, out)
	require.Contains(t, out, "by user:carol")
	env["ATMOST_OPERATOR"] = "ops-bot"
	code, out = runAs(carol, "switch", "off", "--reason", "environment")
	require.Equal(t, cli.ExitOK, code, out)
	require.Contains(t, out, "by ops-bot")
	code, out = runAs(carol, "switch", "on", "--reason", "flag", "--operator", "dave")
	require.Equal(t, cli.ExitOK, code, out)
	require.Contains(t, out, "by dave")

	delete(env, "ATMOST_OPERATOR")
	before := schemaState(t, db)
	code, out = runAs(nobody, "epoch", "bump", "--reason", "restored")
	require.Equal(t, cli.ExitUsage, code, out)
	require.Contains(t, out, "--operator NAME or ATMOST_OPERATOR")
	require.Equal(t, before, schemaState(t, db))

	var actors []string
	for _, r := range controlHistory(t, db) {
		actors = append(actors, r.Actor)
	}
	require.Equal(t, []string{"user:carol", "ops-bot", "dave"}, actors)
}

func ptr(s string) *string { return &s }
