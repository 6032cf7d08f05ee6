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

// operators add prints a token once, which then names its operator in the ledger; ls never
// shows a token; revoke ends it; each add and revoke is in the control history under the CLI's
// operator, and a refused command changes nothing.
func TestOperatorsAddListRevoke(t *testing.T) {
	t.Parallel()
	db, env := accountsEnv(t)
	ctx := context.Background()
	l, err := ledger.New(db.Pool, ledger.Config{})
	require.NoError(t, err)

	res := run(env, "operators", "add", "carol", "--role", "operator", "--reason", "on call")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	require.Contains(t, lines[0], "operator carol added (role operator) by alice")
	token := lines[len(lines)-1]
	op, err := l.OperatorByToken(ctx, token)
	require.NoError(t, err)
	require.Equal(t, "carol", op.Name)

	res = run(env, "operators", "add", "vic", "--role", "viewer", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	var added struct{ Name, Role, Token string }
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &added))
	require.Equal(t, "viewer", added.Role)
	op, err = l.OperatorByToken(ctx, added.Token)
	require.NoError(t, err)
	require.Equal(t, ledger.RoleViewer, op.Role)

	for _, args := range [][]string{
		{"operators", "add", "dave"},
		{"operators", "add", "dave", "--role", "admin"},
		{"operators", "add", "bootstrap", "--role", "operator"},
		{"operators", "add", "a/b", "--role", "operator"},
		{"operators", "revoke", "carol"},
	} {
		res = run(env, args...)
		require.Equal(t, cli.ExitUsage, res.code, "%v: %s", args, res.stderr)
	}
	res = run(env, "operators", "add", "carol", "--role", "viewer")
	require.Equal(t, cli.ExitError, res.code, res.stderr)

	res = run(env, "operators", "ls")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Regexp(t, `carol\s+operator\s+\S+\s+-`, res.stdout)
	require.Regexp(t, `vic\s+viewer`, res.stdout)
	require.NotContains(t, res.stdout, token)
	require.NotContains(t, res.stdout, added.Token)

	res = run(env, "operators", "revoke", "carol", "--reason", "left the team")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	_, err = l.OperatorByToken(ctx, token)
	require.ErrorIs(t, err, ledger.ErrUnknownOperator)
	res = run(env, "operators", "revoke", "carol", "--reason", "again")
	require.Equal(t, cli.ExitError, res.code, res.stderr)
	res = run(env, "operators", "ls", "--json")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.NotContains(t, res.stdout, "token")
	var listed []struct {
		Name      string
		RevokedAt *string `json:"revoked_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.stdout), &listed))
	require.Len(t, listed, 2)
	require.NotNil(t, listed[0].RevokedAt)

	res = run(env, "controls", "log", "--kind", "operator")
	require.Equal(t, cli.ExitOK, res.code, res.stderr)
	require.Equal(t, 3, strings.Count(res.stdout, "alice"), res.stdout)
	require.Contains(t, res.stdout, "left the team")
}
