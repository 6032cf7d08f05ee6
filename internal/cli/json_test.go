package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/pkg/ledger"
)

// requireSnakeCase checks that every key of the JSON a command printed is snake_case.
func requireSnakeCase(t *testing.T, out string, context ...any) {
	t.Helper()
	require.NotEmpty(t, strings.TrimSpace(out), context...)
	bad, err := cli.NonSnakeKeys([]byte(out))
	require.NoError(t, err, context...)
	require.Empty(t, bad, context...)
}

// With --json every command prints snake_case keys, and every error, refused or usage, is one
// JSON object on standard error with its exit code; the same commands as text print no JSON.
// (events tail and restore reconcile are checked where their tests print JSON.)
func TestEveryJSONOutputIsSnakeCaseAndEveryErrorAnObject(t *testing.T) {
	t.Parallel()
	s := newScene(t)
	failed := s.failed("failed").String()
	parked := s.parked("parked").String()
	indeterminate := s.indeterminate("unknown").String()
	published := s.published("published").String()
	_, err := s.l.Reject(s.ctx, []ledger.Rejection{{Reason: "malformed_json", Detail: "bad", Subject: "atmost.intent.acct-1", Stream: "ATMOST_INTENTS",
		StreamSeq: 3, Headers: map[string][]string{"Nats-Msg-Id": {"m3"}}, Raw: []byte("{")}})
	require.NoError(t, err)

	for _, args := range [][]string{
		{"version"},
		{"migrate", "status"},
		{"migrate"},
		{"switch", "on", "--account", "acct-1", "--reason", "noisy"},
		{"switch", "ls"},
		{"policy", "set", "--account", "acct-1", "--attempt-cap", "4", "--reason", "flaky"},
		{"policy", "set", "--backoff-base", "2s", "--reason", "slower"},
		{"policy", "get"},
		{"policy", "get", "--account", "acct-1"},
		{"epoch", "bump", "--reason", "drill"},
		{"epoch", "show"},
		{"controls", "log"},
		{"intents", "ls"},
		{"intents", "ls", "--sort", "updated", "--desc", "--limit", "1"},
		{"intents", "show", indeterminate},
		{"intents", "show", published},
		{"rejects", "ls"},
		{"park", indeterminate, "--reason", "look"},
		{"resolve", parked, "--failed", "--evidence", "not on the platform"},
		{"retry", failed, "--reason", "back"},
		{"accounts", "add", "acct-2", "--platform", "sim", "--settings", `{"url":"http://127.0.0.1:1"}`, "--reason", "another"},
		{"accounts", "ls"},
		{"accounts", "show", "acct-1"},
		{"accounts", "update", "acct-2", "--contract-version", "v2", "--reason", "pin"},
		{"accounts", "rotate", "acct-1", "--reason", "new token"},
		{"accounts", "disable", "acct-2", "--reason", "moving"},
		{"accounts", "enable", "acct-2", "--reason", "moved"},
		{"accounts", "revoke", "acct-2", "--reason", "leaked"},
		{"controls", "log", "--kind", "account"},
	} {
		res := s.run(append(args, "--json")...)
		require.Equal(t, cli.ExitOK, res.code, "%v: %s", args, res.stderr)
		requireSnakeCase(t, res.stdout, "atmost %v --json", args)
		require.Empty(t, res.stderr, "%v", args)
	}

	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"park", published, "--reason", "x"}, cli.ExitError},
		{[]string{"intents", "show", "dk1:" + strings.Repeat("0", 64)}, cli.ExitError},
		{[]string{"policy", "get", "--account", "acct-nosuch"}, cli.ExitError},
		{[]string{"switch", "on", "--account", "acct-nosuch", "--reason", "x"}, cli.ExitError},
		{[]string{"switch", "on"}, cli.ExitUsage},
		{[]string{"intents", "ls", "--limit", "0"}, cli.ExitUsage},
		{[]string{"policy", "set", "--attempt-cap", "many", "--reason", "x"}, cli.ExitUsage},
		{[]string{"intents", "list"}, cli.ExitUsage},
		{[]string{"accounts", "show", "acct-nosuch"}, cli.ExitError},
		{[]string{"accounts", "rotate", "acct-nosuch", "--reason", "x"}, cli.ExitError},
		{[]string{"accounts", "add", "acct-3", "--platform", "nosuch", "--reason", "x"}, cli.ExitError},
		{[]string{"accounts", "add", "acct-3", "--reason", "x"}, cli.ExitUsage},
		{[]string{"accounts", "update", "acct-1", "--reason", "x"}, cli.ExitUsage},
		{[]string{"accounts", "ls", "acct-1"}, cli.ExitUsage},
	} {
		res := s.run(append(tc.args, "--json")...)
		require.Equal(t, tc.code, res.code, "%v: %s", tc.args, res.stderr)
		require.Empty(t, res.stdout, "%v", tc.args)
		obj := errorObject(t, res.stderr, tc.args)
		require.EqualValues(t, tc.code, obj["code"], "%v", tc.args)
		require.True(t, strings.HasPrefix(obj["command"].(string), "atmost "+tc.args[0]), "%v: %v", tc.args, obj)
		requireSnakeCase(t, res.stderr, tc.args)
		text := s.run(tc.args...)
		require.Equal(t, tc.code, text.code)
		require.True(t, strings.HasPrefix(text.stderr, obj["command"].(string)+": "+obj["error"].(string)+"\n"), "%v: the text says the same: %s", tc.args, text.stderr)
	}
}
