package ledger_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger"
)

// Orphans is what replaced the foreign keys of migrations 39 to 41: it must see each kind of row
// that points nowhere, and nothing in a sound ledger.
func TestOrphansFindsRowsWhoseIntentDoesNotExist(t *testing.T) {
	e := newEnv(t)
	c := e.authorized("a sound intent, authorized")
	_, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true})
	require.NoError(t, err)
	o, err := e.l.Orphans(e.ctx)
	require.NoError(t, err)
	require.Equal(t, ledger.Orphans{}, o, "a sound ledger has none")

	// Rows written behind the ledger's back, as only a bug (or a hand) could.
	e.exec(`INSERT INTO history (delivery_key, seq, from_state, to_state, actor) VALUES (decode(repeat('ab', 32), 'hex'), 1, NULL, 'pending', 'hand')`)
	e.exec(`INSERT INTO attempts (attempt_token, delivery_key, account_id, action, request_hash, credential_version, epoch, generation)
		VALUES (decode(repeat('cd', 16), 'hex'), decode(repeat('ab', 32), 'hex'), 'acct-1', 'post', decode(repeat('00', 32), 'hex'), 1, 1, 999999)`)
	e.exec(`INSERT INTO attempt_evidence (attempt_token, delivery_key, epoch, generation, outcome, fenced)
		VALUES (decode(repeat('cd', 16), 'hex'), decode(repeat('ab', 32), 'hex'), 1, 999999, 'abandoned', false)`)
	e.exec(`INSERT INTO reconciliations (attempt_token, step, delivery_key, actor) VALUES (decode(repeat('cd', 16), 'hex'), 'claimed', decode(repeat('ab', 32), 'hex'), 'hand')`)
	e.exec(`INSERT INTO outbox (delivery_key, seq) VALUES (decode(repeat('ef', 32), 'hex'), 7)`)
	o, err = e.l.Orphans(e.ctx)
	require.NoError(t, err)
	require.Equal(t, ledger.Orphans{History: 1, Attempts: 1, Evidence: 1, Reconciliations: 1, Outbox: 1}, o)
	require.EqualValues(t, 5, o.Total())
}
