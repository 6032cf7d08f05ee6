package ledger_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// A hot write names what it left in the outbox of each intent, so that its writer publishes
// without reading the outbox back: at READ COMMITTED all of it (the transitions it wrote, and
// those an earlier transaction left unpublished, read behind its statement); at SERIALIZABLE
// its own only, marked incomplete, for the writer to read back. Either way, what the writer
// ends up publishing is exactly what the outbox holds of the intent after the commit, field
// for field as the relay's own read gives it, a stale claim's abandonment and a traceparent
// included.
func TestAWriteNamesWhatItLeftInTheOutbox(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			e := newEnvAt(t, iso)
			const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
			// check compares what a write named of key with the outbox after its commit.
			check := func(step string, key identity.DeliveryKey, o ledger.Outboxed) {
				t.Helper()
				want, err := e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
				require.NoError(t, err)
				require.NotEmpty(t, want, step)
				require.Equal(t, iso == pgx.ReadCommitted, o.Complete, step)
				var written ledger.Written
				written.Add(key, o)
				if !o.Complete {
					require.Equal(t, []identity.DeliveryKey{key}, written.Unread, step)
					for _, u := range o.Rows {
						require.Contains(t, want, u, "%s: its own transitions, named all the same", step)
					}
					return
				}
				require.Empty(t, written.Unread, step)
				require.Equal(t, want, o.Rows, "%s: each transition once, in sequence order", step)
				require.Equal(t, want, written.Rows, step)
			}
			publish := func(key identity.DeliveryKey) {
				t.Helper()
				rows, err := e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
				require.NoError(t, err)
				_, err = e.l.Published(e.ctx, rows)
				require.NoError(t, err)
			}

			a, b := envelope(t, account, "named a"), envelope(t, account, "named b")
			sub, err := e.l.SubmitTraced(e.ctx, []identity.Envelope{a, b}, []string{traceparent, ""})
			require.NoError(t, err)
			check("submit, traced", sub[0].Key, sub[0].Outbox)
			check("submit", sub[1].Key, sub[1].Outbox)
			require.Equal(t, traceparent, sub[0].Outbox.Rows[0].TraceParent)
			require.True(t, sub[0].Outbox.Rows[0].Dispatch)

			// a's submission was published; b's is still in the outbox (its ingester has not
			// removed it yet, or its publication failed): b's Begin names both.
			publish(sub[0].Key)
			again, err := e.l.Submit(e.ctx, []identity.Envelope{b})
			require.NoError(t, err)
			require.Equal(t, ledger.Duplicate, again[0].Outcome)
			check("a duplicate's earlier transition", sub[1].Key, again[0].Outbox)
			begun, err := e.l.BeginMany(e.ctx, []ledger.BeginRequest{
				{Key: sub[0].Key, RequestHash: requestHash("named a")},
				{Key: sub[1].Key, RequestHash: requestHash("named b")},
			}, lease)
			require.NoError(t, err)
			check("begin, own only", sub[0].Key, begun[0].Outbox)
			check("begin, with an earlier transition", sub[1].Key, begun[1].Outbox)
			if iso == pgx.ReadCommitted {
				require.Len(t, begun[1].Outbox.Rows, 2)
			}

			// A stale claim: Begin closes it (abandoned) and claims again, two transitions.
			publish(sub[0].Key)
			e.exec(`UPDATE intents SET lease_expires_at = now() - INTERVAL '1 second' WHERE delivery_key = $1`, sub[0].Key.Bytes())
			c, err := e.l.BeginMany(e.ctx, []ledger.BeginRequest{{Key: sub[0].Key, RequestHash: requestHash("named a")}}, lease)
			require.NoError(t, err)
			require.NoError(t, c[0].Err)
			check("begin over a stale claim", sub[0].Key, c[0].Outbox)
			if iso == pgx.ReadCommitted {
				require.Equal(t, ledger.ReasonAbandoned, c[0].Outbox.Rows[0].Reason)
			}

			claim := c[0].Claim
			auth, err := e.l.AuthorizeMany(e.ctx, []ledger.Claim{claim}, inFlight, contract)
			require.NoError(t, err)
			require.True(t, auth[0].Authorization.Authorized())
			check("authorize, with the claim's transitions unpublished", claim.Key, auth[0].Outbox)

			publish(claim.Key)
			done, err := e.l.CompleteMany(e.ctx, []ledger.Report{{Claim: claim, Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: "o-a", Confirmed: true}}})
			require.NoError(t, err)
			require.NoError(t, done[0].Err)
			check("complete", claim.Key, done[0].Outbox)

			// A write that changes nothing (here the same report again, which answers as it
			// landed) names nothing of its own.
			repeat, err := e.l.CompleteMany(e.ctx, []ledger.Report{{Claim: claim, Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: "o-a", Confirmed: true}}})
			require.NoError(t, err)
			require.True(t, repeat[0].Completion.Repeated)
			publish(claim.Key)
			repeat, err = e.l.CompleteMany(e.ctx, []ledger.Report{{Claim: claim, Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: "o-a", Confirmed: true}}})
			require.NoError(t, err)
			require.Empty(t, repeat[0].Outbox.Rows)
		})
	}
}

// The transitions of an intent that JetStream acknowledged before its writer took it up (its
// work item followed them: BeginRequest.Acknowledged, carried on the claim to Authorize and
// Complete) are left out of what the writes name, though the outbox still holds them for
// their publisher to remove; an intent taken up without it has them named, as before.
func TestAWriteLeavesOutWhatWasAcknowledgedBeforeIt(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	sub, err := e.l.Submit(e.ctx, []identity.Envelope{envelope(t, account, "followed"), envelope(t, account, "unpromised")})
	require.NoError(t, err)
	followed, unpromised := sub[0].Key, sub[1].Key
	seqs := func(o ledger.Outboxed) []int64 {
		require.True(t, o.Complete)
		var out []int64
		for _, u := range o.Rows {
			out = append(out, u.Seq)
		}
		return out
	}
	begun, err := e.l.BeginMany(e.ctx, []ledger.BeginRequest{
		{Key: followed, RequestHash: requestHash("followed"), Acknowledged: 1},
		{Key: unpromised, RequestHash: requestHash("unpromised")},
	}, lease)
	require.NoError(t, err)
	require.Equal(t, []int64{2}, seqs(begun[0].Outbox), "the claim only: the submission was acknowledged")
	require.Equal(t, []int64{1, 2}, seqs(begun[1].Outbox), "the submission still in the outbox, and the claim")
	require.Equal(t, int64(1), begun[0].Claim.Acknowledged)

	auth, err := e.l.AuthorizeMany(e.ctx, []ledger.Claim{begun[0].Claim, begun[1].Claim}, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3}, seqs(auth[0].Outbox))
	require.Equal(t, []int64{1, 2, 3}, seqs(auth[1].Outbox))
	done, err := e.l.CompleteMany(e.ctx, []ledger.Report{
		{Claim: begun[0].Claim, Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: "o-f", Confirmed: true}},
		{Claim: begun[1].Claim, Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: "o-u", Confirmed: true}},
	})
	require.NoError(t, err)
	require.Equal(t, []int64{2, 3, 4}, seqs(done[0].Outbox))
	require.Equal(t, []int64{1, 2, 3, 4}, seqs(done[1].Outbox))

	left, err := e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{followed})
	require.NoError(t, err)
	require.Len(t, left, 4, "the outbox still holds the acknowledged submission, for its publisher")
}

// A write whose statement waited for another intent's lock can find, on an intent of its
// batch, a transition that a transaction begun after its own committed meanwhile: younger
// than the write's now(), but committed before the write's. The write names it, before its
// own, as a read after the commit would have given it; told apart by age, it was left to the
// slow path, and the writer published its own claim ahead of the abandonment before it.
func TestAWriteNamesWhatATransactionBegunAfterItCommittedBeforeIt(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	first, second := e.submit("locked first"), e.submit("abandoned meanwhile")
	if bytes.Compare(first.Bytes(), second.Bytes()) > 0 {
		first, second = second, first
	}
	// second holds a claim whose lease expired: the sweeper abandons it while the Begin waits.
	_, err := e.l.Begin(e.ctx, second, requestHash("abandoned meanwhile"), lease)
	require.NoError(t, err)
	e.exec(`UPDATE intents SET lease_expires_at = now() - INTERVAL '1 second' WHERE delivery_key = $1`, second.Bytes())

	holder, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(e.ctx) }()
	_, err = holder.Exec(e.ctx, `SELECT 1 FROM intents WHERE delivery_key = $1 FOR UPDATE`, first.Bytes())
	require.NoError(t, err)

	type begun struct {
		res []ledger.BeginResult
		err error
	}
	done := make(chan begun, 1)
	go func() {
		res, err := e.l.BeginMany(e.ctx, []ledger.BeginRequest{
			{Key: first, RequestHash: requestHash("locked first")},
			{Key: second, RequestHash: requestHash("abandoned meanwhile")},
		}, lease)
		done <- begun{res, err}
	}()
	require.Eventually(t, func() bool {
		return e.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 1
	}, 10*time.Second, 5*time.Millisecond, "the Begin waits for the first intent, in key order")
	expired, err := e.ledgerWith(ledger.Config{Actor: "sweeper"}).ExpireLeases(e.ctx, 10)
	require.NoError(t, err)
	require.Equal(t, 1, expired.Abandoned, "the sweeper, begun after the Begin, abandons the stale claim first")
	require.NoError(t, holder.Commit(e.ctx))

	b := <-done
	require.NoError(t, b.err)
	require.NoError(t, b.res[1].Err, "the abandoned intent is free: the Begin claims it")
	want, err := e.l.UnpublishedFor(e.ctx, []identity.DeliveryKey{second})
	require.NoError(t, err)
	var abandoned []ledger.Unpublished
	for _, u := range want {
		if u.Reason == ledger.ReasonAbandoned {
			abandoned = append(abandoned, u)
		}
	}
	require.Len(t, abandoned, 1, "the sweeper's abandonment is in the outbox")
	require.True(t, b.res[1].Outbox.Complete)
	var written ledger.Written
	written.Add(second, b.res[1].Outbox)
	require.Equal(t, want, written.Rows, "every transition of the intent committed before the Begin's, the abandonment before the claim, each once")
}
