package ledger_test

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger"
)

// An operator's token is shown once and works until the operator is revoked; the ledger keeps
// only its hash, and every add and revoke is in the control history with who and why.
func TestOperatorsAreAddedRevokedAndAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token, err := e.l.AddOperator(e.ctx, "alice", ledger.RoleOperator, ledger.Actor{Name: "user:root", Reason: "on call"})
	require.NoError(t, err)
	require.Greater(t, len(token), 40)
	viewerToken, err := e.l.AddOperator(e.ctx, "vic", ledger.RoleViewer, ledger.Actor{Name: "user:root", Reason: ""})
	require.NoError(t, err)
	require.NotEqual(t, token, viewerToken)

	op, err := e.l.OperatorByToken(e.ctx, token)
	require.NoError(t, err)
	require.Equal(t, "alice", op.Name)
	require.Equal(t, ledger.RoleOperator, op.Role)
	op, err = e.l.OperatorByToken(e.ctx, viewerToken)
	require.NoError(t, err)
	require.Equal(t, ledger.RoleViewer, op.Role)

	// Only the hash is stored: the token itself is nowhere in the table.
	require.Equal(t, 0, e.count(`SELECT count(*) FROM operators WHERE position($1::BYTEA IN token_sha256) > 0`, []byte(token)))
	sum := sha256.Sum256([]byte(token))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM operators WHERE token_sha256 = $1`, sum[:]))

	// A token that differs in one character, or lacks its prefix, names nobody.
	last := token[len(token)-1]
	other := byte('A')
	if last == 'A' {
		other = 'B'
	}
	for _, wrong := range []string{token[:len(token)-1] + string(other), token[:len(token)-1], strings.TrimPrefix(token, "atmost_op_"), ""} {
		_, err = e.l.OperatorByToken(e.ctx, wrong)
		require.ErrorIs(t, err, ledger.ErrUnknownOperator, wrong)
	}

	_, err = e.l.AddOperator(e.ctx, "alice", ledger.RoleViewer, ledger.Actor{Name: "user:root", Reason: ""})
	require.ErrorIs(t, err, ledger.ErrOperatorExists)
	for _, bad := range []string{"", "bootstrap", "Bootstrap", "a/b", "with space", "-dash", strings.Repeat("x", 65), "é"} {
		_, err = e.l.AddOperator(e.ctx, bad, ledger.RoleOperator, ledger.Actor{Name: "user:root", Reason: ""})
		require.Error(t, err, bad)
	}
	_, err = e.l.AddOperator(e.ctx, "carol", "admin", ledger.Actor{Name: "user:root", Reason: ""})
	require.Error(t, err)

	revoked, err := e.l.RevokeOperator(e.ctx, "alice", ledger.Actor{Name: "user:root", Reason: "left the team"})
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	_, err = e.l.OperatorByToken(e.ctx, token)
	require.ErrorIs(t, err, ledger.ErrUnknownOperator, "a revoked operator's token names nobody")
	_, err = e.l.RevokeOperator(e.ctx, "alice", ledger.Actor{Name: "user:root", Reason: "again"})
	require.ErrorIs(t, err, ledger.ErrOperatorRevoked)
	_, err = e.l.RevokeOperator(e.ctx, "nobody", ledger.Actor{Name: "user:root", Reason: "who"})
	require.ErrorIs(t, err, ledger.ErrUnknownOperator)
	_, err = e.l.RevokeOperator(e.ctx, "vic", ledger.Actor{Name: "user:root", Reason: " "})
	require.Error(t, err, "a revoke says why")
	_, err = e.l.AddOperator(e.ctx, "alice", ledger.RoleOperator, ledger.Actor{Name: "user:root", Reason: ""})
	require.ErrorIs(t, err, ledger.ErrOperatorExists, "a revoked name is never handed out again")

	ops, err := e.l.Operators(e.ctx)
	require.NoError(t, err)
	require.Len(t, ops, 2)
	require.Equal(t, "alice", ops[0].Name)
	require.NotNil(t, ops[0].RevokedAt)
	require.Nil(t, ops[1].RevokedAt)

	rows, err := e.l.ControlHistory(e.ctx, "operator", 10)
	require.NoError(t, err)
	require.Len(t, rows, 3, "two adds and one revoke; the refused changes left nothing")
	require.Equal(t, "alice", rows[0].Scope)
	require.Equal(t, "user:root", rows[0].Actor)
	require.Equal(t, "left the team", rows[0].Reason)
	require.JSONEq(t, `{"role":"operator","revoked":false}`, string(rows[0].Before))
	require.JSONEq(t, `{"role":"operator","revoked":true}`, string(rows[0].After))
	require.Equal(t, "vic", rows[1].Scope)
	require.JSONEq(t, `{"role":"viewer","revoked":false}`, string(rows[1].After))
	require.Equal(t, "on call", rows[2].Reason)
	for _, r := range rows {
		require.NotContains(t, string(r.After), token[len("atmost_op_"):])
	}
}
