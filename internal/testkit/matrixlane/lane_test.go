package matrixlane_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/testkit/matrixlane"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/matrix"
)

// laneIntents and laneDropRate are the end-to-end run's size and the share of sends whose
// answer the proxy loses after Dendrite stored the event.
const (
	laneIntents  = 500
	laneDropRate = 0.05
)

// sweepInterval is the lane's sweeper's pass. With 5 % of the answers lost, more than the
// policy's trip_unknowns intents can be indeterminate at once, which holds the account; as in a
// deployment, the sweeper heals it once the lookups have caught up.
const sweepInterval = 200 * time.Millisecond

var registry = platform.Registry{matrix.Name: matrix.Open}

// 500 intents go through ingest's ledger, the relay, the dispatcher, the reconciler and the sweeper to a
// room of a real Dendrite, through a proxy that loses the answer of 5 % of the sends after
// Dendrite stored the event (seeded). The room itself, read by another account, holds at most
// one message per intent, in fact exactly one; every intent whose answer was lost went
// indeterminate, and its one lookup found the message (or it was parked); none was sent twice.
func TestFiveHundredIntentsWithLostAnswersMakeNoDuplicateOnDendrite(t *testing.T) {
	s := server(t)
	room := matrixlane.NewRoom(t, s)
	proxy := matrixlane.NewProxy(s.URL, laneDropRate, 46)
	t.Cleanup(proxy.Close)

	w := worldtest.New(t)
	acct := accountFor(t, s, room.ID, proxy.URL(), "2s")
	require.NoError(t, w.Ledger.AddAccount(w.Ctx, ledger.Account{ID: acct.ID, Platform: acct.Platform, Settings: acct.Settings,
		CredentialRef: acct.CredentialRef, CredentialVersion: acct.CredentialVersion}, ledger.Actor{Name: "test", Reason: "the Matrix lane's bot"}))
	unlimited := 0
	_, err := w.Ledger.SetPolicy(w.Ctx, acct.ID, ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "test", Reason: "the lane is not about the rate limit"})
	require.NoError(t, err)

	d, err := dispatch.New(w.Ctx, w.JS, w.Ledger, w.Relay, dispatch.Config{
		Platforms: registry, Batch: 16, Concurrency: 16,
		ClaimLease: ledger.MinLease, InFlightLease: 4 * ledger.MinLease,
		SendTimeout: 5 * time.Second, ReadBackTimeout: 5 * time.Second, Margin: time.Second,
		GateDelay: 200 * time.Millisecond, AckWait: 10 * time.Second,
	})
	require.NoError(t, err)
	w.Run(d.Run)
	rl, err := ledger.New(w.DB.AppPool(t), ledger.Config{Actor: "reconciler"})
	require.NoError(t, err)
	r, err := reconcile.New(w.Ctx, w.JS, rl, relay.New(rl, w.JS, relay.Config{}), reconcile.Config{
		Platforms: registry, Concurrency: 4, LookupTimeout: 10 * time.Second, ReadBackTimeout: 10 * time.Second,
		ScanInterval: 200 * time.Millisecond, RetryDelay: 200 * time.Millisecond, AckWait: 10 * time.Second,
	})
	require.NoError(t, err)
	w.Run(r.Run)
	w.Sweeper(sweepInterval)

	start := time.Now()
	keys := w.Submit(acct.ID, worldtest.Texts("atmost's Matrix lane, message", laneIntents)...)
	intents := w.Settle(keys, 10*time.Minute, func(s ledger.State) bool { return s != ledger.Published && s != ledger.Parked })
	t.Logf("%d intents settled in %s; the proxy lost %d answers of %d sends", len(keys), time.Since(start).Round(time.Millisecond), proxy.Dropped(), proxy.Forwarded())
	w.T.Logf("the account was held %d times for unknown outcomes and healed by the sweeper", w.Count(`SELECT count(*) FROM control_history WHERE kind = 'health' AND reason = 'unknown_outcomes'`))

	// The room's own record, read by the observer: messages of the bot, by the key they carry.
	var byKey map[string][]string
	require.Eventually(t, func() bool {
		byKey = matrixlane.Keyed(room.Events(t), s.UserID)
		return len(byKey) >= len(keys)
	}, time.Minute, 200*time.Millisecond, "the room never showed a message for every intent")
	duplicates, messages := 0, 0
	for _, ids := range byKey {
		messages += len(ids)
		duplicates += len(ids) - 1
	}
	reasons := map[ledger.Reason]int{}
	for _, k := range keys {
		in := intents[k]
		reasons[in.Reason]++
		ids := byKey[k.String()]
		require.Len(t, ids, 1, "intent %s: one message in the room", k)
		if in.State == ledger.Published {
			require.Equal(t, ids[0], in.ObjectID, "intent %s: the ledger names the room's message", k)
		}
	}
	t.Logf("the room holds %d messages of the bot for %d intents: %d duplicates; reasons: %v", messages, len(keys), duplicates, reasons)
	require.Zero(t, duplicates)
	require.Equal(t, len(keys), messages)
	require.EqualValues(t, len(keys), proxy.Forwarded(), "one send per intent reached Dendrite: no resend")
	require.Positive(t, proxy.Dropped(), "the proxy lost some answers (seeded 5 %)")

	// Every lost answer made the intent indeterminate; its one lookup found the message, or the
	// intent was parked for a person.
	unknown := w.Count(`SELECT count(DISTINCT delivery_key) FROM history WHERE to_state = 'indeterminate'`)
	t.Logf("%d intents went indeterminate: %d send_unknown, %d readback_mismatch", unknown,
		w.Count(`SELECT count(*) FROM history WHERE to_state = 'indeterminate' AND reason = 'send_unknown'`),
		w.Count(`SELECT count(*) FROM history WHERE to_state = 'indeterminate' AND reason = 'readback_mismatch'`))
	require.GreaterOrEqual(t, unknown, int(proxy.Dropped()), "every lost answer is an unknown outcome")
	require.Equal(t, unknown, reasons[ledger.ReasonReconciledFound]+reasons[ledger.ReasonReconcileNotFound],
		"every unknown was found by its lookup or parked")
	require.Equal(t, len(keys)-unknown, reasons[ledger.ReasonPublished], "every other intent was published and read back")
	// An attempt a hold stopped before its authorization (evidence "held") sent nothing.
	require.Equal(t, len(keys), w.Count(`SELECT count(*) FROM history WHERE to_state = 'authorized'`), "one authorized attempt per intent")
	require.Equal(t, len(keys), w.Count(`SELECT count(*) FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM attempt_evidence e WHERE e.attempt_token = a.attempt_token AND e.reason = 'held')`), "one attempt per intent, apart from those a hold stopped")
	require.Equal(t, unknown, w.Count(`SELECT count(*) FROM reconciliations WHERE step = 'resolved'`), "one lookup per unknown")
}
