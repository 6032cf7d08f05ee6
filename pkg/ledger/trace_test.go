package ledger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

const (
	traceA = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceB = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
)

// The traceparent is stored with the intent it creates and read back by every reader that
// carries it on (the dispatcher's, the reconciler's, the relay's and the sweeper's), and it is
// no part of the intent's identity: the same envelope with another traceparent is a duplicate
// with the same key, and keeps the first one's.
func TestSubmitTracedStoresTheTraceparentWithTheIntentItCreates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b, c := envelope(t, account, "traced"), envelope(t, account, "untraced"), envelope(t, account, "short slice")

	res, err := e.l.SubmitTraced(e.ctx, []identity.Envelope{a, b, c}, []string{traceA, ""})
	require.NoError(t, err)
	for _, r := range res {
		require.Equal(t, ledger.Created, r.Outcome)
	}
	require.Equal(t, a.DeliveryKey(), res[0].Key, "the traceparent is no part of the key")
	require.Equal(t, traceA, e.intent(a.DeliveryKey()).TraceParent)
	require.Empty(t, e.intent(b.DeliveryKey()).TraceParent)
	require.Empty(t, e.intent(c.DeliveryKey()).TraceParent)
	require.Equal(t, 2, e.count(`SELECT count(*) FROM intents WHERE traceparent IS NULL`), "none is NULL, not ''")

	again, err := e.l.SubmitTraced(e.ctx, []identity.Envelope{a, b}, []string{traceB, traceB})
	require.NoError(t, err)
	require.Equal(t, ledger.Duplicate, again[0].Outcome)
	require.Equal(t, a.DeliveryKey(), again[0].Key)
	require.Equal(t, traceA, e.intent(a.DeliveryKey()).TraceParent, "a duplicate keeps the first traceparent")
	require.Empty(t, e.intent(b.DeliveryKey()).TraceParent, "a duplicate adds none")

	many, err := e.l.GetMany(e.ctx, []identity.DeliveryKey{a.DeliveryKey()})
	require.NoError(t, err)
	require.Equal(t, traceA, many[a.DeliveryKey()].TraceParent)
	rec, err := e.l.Inspect(e.ctx, a.DeliveryKey())
	require.NoError(t, err)
	require.Equal(t, traceA, rec.Intent.TraceParent)

	out, err := e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{a.DeliveryKey(), b.DeliveryKey()})
	require.NoError(t, err)
	require.Len(t, out, 2)
	byKey := map[identity.DeliveryKey]ledger.Unpublished{}
	for _, u := range out {
		byKey[u.Key] = u
	}
	require.True(t, byKey[a.DeliveryKey()].Dispatch)
	require.Equal(t, traceA, byKey[a.DeliveryKey()].TraceParent, "the relay carries it on the work item")
	require.Empty(t, byKey[b.DeliveryKey()].TraceParent)
	all, err := e.l.Unpublished(e.ctx, 10, 0)
	require.NoError(t, err)
	require.Len(t, all, 3)
	for _, u := range all {
		if u.Key == a.DeliveryKey() {
			require.Equal(t, traceA, u.TraceParent)
		}
	}

	e.exec(`UPDATE intents SET updated_at = now() - INTERVAL '1 hour'`)
	stranded, err := e.l.StrandedPending(e.ctx, time.Minute, 10)
	require.NoError(t, err)
	require.Len(t, stranded, 3)
	for _, s := range stranded {
		if s.Key == a.DeliveryKey() {
			require.Equal(t, traceA, s.TraceParent, "the sweeper's republished work carries it too")
		} else {
			require.Empty(t, s.TraceParent)
		}
	}
}

// The witness of an authorization carries the intent's traceparent, also when a relay round
// already took its authorized transition from the outbox.
func TestTheWitnessCarriesTheIntentsTraceparent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := envelope(t, account, "witnessed")
	_, err := e.l.SubmitTraced(e.ctx, []identity.Envelope{a}, []string{traceA})
	require.NoError(t, err)
	c, err := e.l.Begin(e.ctx, a.DeliveryKey(), requestHash("witnessed"), lease)
	require.NoError(t, err)
	_, err = e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	e.exec(`DELETE FROM outbox`)
	rows, err := e.l.WitnessFor(e.ctx, []ledger.Claim{c})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, ledger.Authorized, rows[0].To)
	require.Equal(t, traceA, rows[0].TraceParent)
}
