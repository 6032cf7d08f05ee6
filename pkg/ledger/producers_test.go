package ledger_test

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger"
)

// A producer's token is shown once and works until the producer is revoked; the ledger keeps
// only its hash, and every add and revoke is in the control history with who and why.
func TestProducersAreAddedRevokedAndAudited(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token, err := e.l.AddProducer(e.ctx, "bot-a", []string{"acct-a", "team a"}, ledger.Actor{Name: "user:root", Reason: "the summarizer"})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(token, ledger.ProducerTokenPrefix))
	require.Len(t, token, len(ledger.ProducerTokenPrefix)+43, "32 random bytes, base64url")

	p, err := e.l.ProducerByToken(e.ctx, token)
	require.NoError(t, err)
	require.Equal(t, "bot-a", p.Name)
	require.Equal(t, []string{"acct-a", "team a"}, p.Accounts)

	// Only the hash is stored: the token itself is nowhere in the table.
	require.Equal(t, 0, e.count(`SELECT count(*) FROM producers WHERE position($1::BYTEA IN token_sha256) > 0`, []byte(token)))
	sum := sha256.Sum256([]byte(token))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM producers WHERE token_sha256 = $1`, sum[:]))

	// A token that differs in one character, lacks its prefix, or is an operator's, names nobody.
	last := token[len(token)-1]
	other := byte('A')
	if last == 'A' {
		other = 'B'
	}
	opToken, err := e.l.AddOperator(e.ctx, "alice", ledger.RoleOperator, ledger.Actor{Name: "user:root", Reason: ""})
	require.NoError(t, err)
	for _, wrong := range []string{token[:len(token)-1] + string(other), token[:len(token)-1], strings.TrimPrefix(token, ledger.ProducerTokenPrefix), "", opToken,
		"atmost_op_" + strings.TrimPrefix(token, ledger.ProducerTokenPrefix)} {
		_, err = e.l.ProducerByToken(e.ctx, wrong)
		require.ErrorIs(t, err, ledger.ErrUnknownProducer, wrong)
	}

	_, err = e.l.AddProducer(e.ctx, "bot-a", []string{"acct-b"}, ledger.Actor{Name: "user:root", Reason: ""})
	require.ErrorIs(t, err, ledger.ErrProducerExists)
	for _, bad := range [][]string{nil, {}, {""}, {"acct-a", "acct-a"}, {strings.Repeat("x", 129)}, {"a\x01b"}} {
		_, err = e.l.AddProducer(e.ctx, "bot-c", bad, ledger.Actor{Name: "user:root", Reason: ""})
		require.Error(t, err, "%q", bad)
	}
	for _, bad := range []string{"", "a/b", "with space", "-dash", strings.Repeat("x", 65)} {
		_, err = e.l.AddProducer(e.ctx, bad, []string{"acct-a"}, ledger.Actor{Name: "user:root", Reason: ""})
		require.Error(t, err, bad)
	}
	other2, err := e.l.AddProducer(e.ctx, "bot-b", []string{"acct-b"}, ledger.Actor{Name: "user:root", Reason: ""})
	require.NoError(t, err)

	revoked, err := e.l.RevokeProducer(e.ctx, "bot-a", ledger.Actor{Name: "user:root", Reason: "key leaked"})
	require.NoError(t, err)
	require.NotNil(t, revoked.RevokedAt)
	_, err = e.l.ProducerByToken(e.ctx, token)
	require.ErrorIs(t, err, ledger.ErrUnknownProducer, "a revoked producer's token names nobody")
	_, err = e.l.ProducerByToken(e.ctx, other2)
	require.NoError(t, err, "revoking one producer leaves the others")
	_, err = e.l.RevokeProducer(e.ctx, "bot-a", ledger.Actor{Name: "user:root", Reason: "again"})
	require.ErrorIs(t, err, ledger.ErrProducerRevoked)
	_, err = e.l.RevokeProducer(e.ctx, "nobody", ledger.Actor{Name: "user:root", Reason: "who"})
	require.ErrorIs(t, err, ledger.ErrUnknownProducer)
	_, err = e.l.RevokeProducer(e.ctx, "bot-b", ledger.Actor{Name: "user:root", Reason: " "})
	require.Error(t, err, "a revoke says why")
	_, err = e.l.AddProducer(e.ctx, "bot-a", []string{"acct-a"}, ledger.Actor{Name: "user:root", Reason: ""})
	require.ErrorIs(t, err, ledger.ErrProducerExists, "a revoked name is never handed out again")

	ps, err := e.l.Producers(e.ctx)
	require.NoError(t, err)
	require.Len(t, ps, 2)
	require.Equal(t, "bot-a", ps[0].Name)
	require.NotNil(t, ps[0].RevokedAt)
	require.Nil(t, ps[1].RevokedAt)
	got, err := e.l.Producer(e.ctx, "bot-b")
	require.NoError(t, err)
	require.Equal(t, []string{"acct-b"}, got.Accounts)
	_, err = e.l.Producer(e.ctx, "nobody")
	require.ErrorIs(t, err, ledger.ErrUnknownProducer)

	rows, err := e.l.ControlHistory(e.ctx, ledger.ProducerKind, 10)
	require.NoError(t, err)
	require.Len(t, rows, 3, "two adds and one revoke; the refused changes left nothing")
	require.Equal(t, "bot-a", rows[0].Scope)
	require.Equal(t, "user:root", rows[0].Actor)
	require.Equal(t, "key leaked", rows[0].Reason)
	require.JSONEq(t, `{"accounts":["acct-a","team a"],"revoked":false}`, string(rows[0].Before))
	require.JSONEq(t, `{"accounts":["acct-a","team a"],"revoked":true}`, string(rows[0].After))
	require.Equal(t, "bot-b", rows[1].Scope)
	require.Equal(t, "the summarizer", rows[2].Reason)
	for _, r := range rows {
		require.NotContains(t, string(r.After), token[len(ledger.ProducerTokenPrefix):])
	}
}

// A producer's token acts for the accounts it was added with, and for no other.
func TestAProducerTokenNamesItsAccountsAndNoOther(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token, err := e.l.AddProducer(e.ctx, "bot-a", []string{"acct-a"}, ledger.Actor{Name: "user:root", Reason: ""})
	require.NoError(t, err)
	p, err := e.l.ProducerByToken(e.ctx, token)
	require.NoError(t, err)
	require.True(t, p.ActsFor("acct-a"))
	for _, other := range []string{"acct-b", "", "acct-a ", "ACCT-A"} {
		require.False(t, p.ActsFor(other), other)
	}
}

// The schema itself refuses a producer bound to no account, whatever the caller checked.
func TestAProducerWithoutAccountsIsRefusedByTheSchema(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.pool.Exec(e.ctx, `INSERT INTO producers (name, token_sha256, accounts) VALUES ('x', '\x00', '{}')`)
	require.Error(t, err)
}
