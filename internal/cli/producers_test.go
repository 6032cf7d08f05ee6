package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/pkg/ledger"
)

// producers add prints a token once, which then names its producer and its accounts in the
// ledger; ls never shows a token; revoke ends it; each add and revoke is in the control
// history under the CLI's operator, and a refused command changes nothing.
func TestProducersAddListRevoke(t *testing.T) {
	t.Parallel()
	db, env := accountsEnv(t)
	ctx := context.Background()
	l, err := ledger.New(db.Pool, ledger.Config{})
	require.NoError(t, err)

	res := run(env, "producers", "add", "bot-a", "--account", "acct-a", "--account", "team a", "--reason", "the summarizer")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Contains(t, lines[0], `producer bot-a added for "acct-a", "team a" by alice`)
	token := lines[len(lines)-1]
	p, err := l.ProducerByToken(ctx, token)
	require.NoError(t, err)
	require.Equal(t, "bot-a", p.Name)
	require.Equal(t, []string{"acct-a", "team a"}, p.Accounts)

	res = run(env, "producers", "add", "bot-b", "--account", "acct-b", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var added struct {
		Name, Token string
		Accounts    []string
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &added))
	require.Equal(t, []string{"acct-b"}, added.Accounts)
	p, err = l.ProducerByToken(ctx, added.Token)
	require.NoError(t, err)
	require.Equal(t, "bot-b", p.Name)

	for _, args := range [][]string{
		{"producers", "add", "bot-c"},
		{"producers", "add", "bot-c", "--account", ""},
		{"producers", "add", "bot-c", "--account", "a", "--account", "a"},
		{"producers", "add", "a/b", "--account", "acct-a"},
		{"producers", "revoke", "bot-a"},
	} {
		res = run(env, args...)
		require.Equal(t, cli.ExitUsage, res.code, "%v: %s", args, res.stderr)
	}
	res = run(env, "producers", "add", "bot-a", "--account", "acct-z")
	require.Equal(t, cli.ExitError, res.code, res.stderr)

	res = run(env, "producers", "ls")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `bot-a\s+"acct-a","team a"\s+\S+\s+-`, res.stdout)
	require.Regexp(t, `bot-b\s+"acct-b"`, res.stdout)
	require.NotContains(t, res.stdout, token)
	require.NotContains(t, res.stdout, added.Token)

	res = run(env, "producers", "revoke", "bot-a", "--reason", "key leaked")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	_, err = l.ProducerByToken(ctx, token)
	require.ErrorIs(t, err, ledger.ErrUnknownProducer)
	res = run(env, "producers", "revoke", "bot-a", "--reason", "again")
	require.Equal(t, cli.ExitError, res.code, res.stderr)
	res = run(env, "producers", "ls", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.NotContains(t, res.stdout, "token")
	var listed []struct {
		Name      string
		RevokedAt *string `json:"revoked_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &listed))
	require.Len(t, listed, 2)
	require.NotNil(t, listed[0].RevokedAt)

	res = run(env, "controls", "log", "--kind", "producer")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, 3, strings.Count(res.stdout, "alice"), res.stdout)
	require.Contains(t, res.stdout, "key leaked")
}
