package ledger_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger"
)

// A parked intent resolved as failed with an object is refused by the statement itself, and
// stays parked: failed means nothing was sent, and a failed intent may be retried, so one that
// named an object on the platform would be posted twice. Every caller (the console, the CLI,
// another program) is held by this one guard.
func TestResolveAsFailedWithAnObjectIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.submit("resolved with an object")
	require.NoError(t, e.l.Park(e.ctx, key, ledger.Actor{Name: "operator", Reason: "stop"}))

	err := e.l.Resolve(e.ctx, key, ledger.Failed, "obj-1", ledger.Actor{Name: "operator", Reason: "seen on the profile"})
	requireRefused(t, err, ledger.ErrObjectNotSent)
	in := e.intent(key)
	require.Equal(t, ledger.Parked, in.State)
	require.Empty(t, in.ObjectID)

	require.NoError(t, e.l.Resolve(e.ctx, key, ledger.Failed, "", ledger.Actor{Name: "operator", Reason: "not on the profile"}))
	require.Equal(t, ledger.Failed, e.state(key))
}

// ParkFrom parks only from the states it is given: a bulk park of pending intents never parks
// one that moved on to authorized meanwhile (its lease expired, so Park itself would take it).
func TestParkFromRefusesAStateOutsideItsList(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("moved on after the preview")
	e.expireLease(c.Key)
	from := []ledger.State{ledger.Pending, ledger.Failed, ledger.Indeterminate}

	requireRefused(t, e.l.ParkFrom(e.ctx, c.Key, from, ledger.Actor{Name: "operator", Reason: "bulk"}), ledger.ErrInvalidTransition)
	require.Equal(t, ledger.Authorized, e.state(c.Key))

	pending := e.submit("still pending")
	require.NoError(t, e.l.ParkFrom(e.ctx, pending, from, ledger.Actor{Name: "operator", Reason: "bulk"}))
	require.Equal(t, ledger.Parked, e.state(pending))

	// A list naming states Park never leaves from widens nothing: published and parked stay.
	published := e.authorized("published before the bulk park")
	_, err := e.l.Complete(e.ctx, published, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true})
	require.NoError(t, err)
	every := []ledger.State{ledger.Pending, ledger.Authorized, ledger.Failed, ledger.Indeterminate, ledger.Published, ledger.Parked}
	requireRefused(t, e.l.ParkFrom(e.ctx, published.Key, every, ledger.Actor{Name: "operator", Reason: "bulk"}), ledger.ErrInvalidTransition)
	require.Equal(t, ledger.Published, e.state(published.Key))
	requireRefused(t, e.l.ParkFrom(e.ctx, pending, every, ledger.Actor{Name: "operator", Reason: "bulk"}), ledger.ErrInvalidTransition)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND to_state = 'parked'`, pending.Bytes()))
}

// A note the ledger will not store is refused by name before any statement runs, by every
// operation that takes one: too long, a NUL (PostgreSQL's raw 22P05 otherwise), another
// control character, or bytes that are not UTF-8. Nothing changes. A note at the limit, with
// newlines and tabs, is stored.
func TestANoteTheLedgerWillNotStoreIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.submit("a note for it")
	bad := map[string]string{
		"too long":  strings.Repeat("é", ledger.MaxNote+1),
		"NUL":       "stop\x00now",
		"control":   "stop\x1bnow",
		"not UTF-8": "stop \xff now",
		"DEL":       "stop\x7f",
	}
	for name, note := range bad {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, e.l.Park(e.ctx, key, ledger.Actor{Name: "operator", Reason: note}), ledger.ErrInvalidNote)
			require.ErrorIs(t, e.l.RetryAs(e.ctx, key, ledger.Actor{Name: "operator", Reason: note}), ledger.ErrInvalidNote)
			require.ErrorIs(t, e.l.Resolve(e.ctx, key, ledger.Failed, "", ledger.Actor{Name: "operator", Reason: note}), ledger.ErrInvalidNote)
			_, err := e.l.SetSwitch(e.ctx, ledger.GlobalScope, true, ledger.Actor{Name: "operator", Reason: note})
			require.ErrorIs(t, err, ledger.ErrInvalidNote)
			n := 3
			_, err = e.l.SetPolicy(e.ctx, ledger.GlobalScope, ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: &n}}, ledger.Actor{Name: "operator", Reason: note})
			require.ErrorIs(t, err, ledger.ErrInvalidNote)
			_, err = e.l.BumpEpoch(e.ctx, ledger.Actor{Name: "operator", Reason: note})
			require.ErrorIs(t, err, ledger.ErrInvalidNote)
			require.ErrorIs(t, e.l.Park(e.ctx, key, ledger.Actor{Name: note, Reason: "stop"}), ledger.ErrInvalidNote, "the actor too")
		})
	}
	require.Equal(t, ledger.Pending, e.state(key))
	require.Zero(t, e.count(`SELECT count(*) FROM control_history`))

	ok := strings.Repeat("é", ledger.MaxNote-2) + "\n\t"
	require.NoError(t, e.l.Park(e.ctx, key, ledger.Actor{Name: "operator", Reason: ok}))
	require.Equal(t, ledger.Parked, e.state(key))
}
