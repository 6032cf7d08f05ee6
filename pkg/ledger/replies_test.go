package ledger_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// submitReply stores a post answering parent (envelope reply_to) and returns its key.
func (e *env) submitReply(text string, parent identity.DeliveryKey) identity.DeliveryKey {
	e.t.Helper()
	req, err := json.Marshal(map[string]string{"text": text})
	require.NoError(e.t, err)
	env, err := identity.NewEnvelope(account, "post", "", req, "", nil)
	require.NoError(e.t, err)
	env, err = env.InReplyTo(parent)
	require.NoError(e.t, err)
	res, err := e.l.Submit(e.ctx, []identity.Envelope{env})
	require.NoError(e.t, err)
	require.Equal(e.t, ledger.Created, res[0].Outcome)
	return res[0].Key
}

// publish takes a submitted intent through Begin, Authorize and a confirmed Complete.
func (e *env) publish(key identity.DeliveryKey, text, object string) {
	e.t.Helper()
	c, err := e.l.Begin(e.ctx, key, requestHash(text), lease)
	require.NoError(e.t, err)
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(e.t, err)
	require.Equal(e.t, ledger.Authorized, a.State, "reason %s", a.Reason)
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: object, Confirmed: true})
	require.NoError(e.t, err)
}

// A reply's parent is stored with it, and read back by Get and Parents.
func TestAReplyIsStoredWithItsParent(t *testing.T) {
	e := newEnv(t)
	parent := e.submit("first")
	reply := e.submitReply("second", parent)
	require.Equal(t, parent, e.intent(reply).ReplyTo)
	require.True(t, e.intent(parent).ReplyTo.IsZero())

	e.publish(parent, "first", "obj-1")
	got, err := e.l.Parents(e.ctx, []identity.DeliveryKey{parent, reply})
	require.NoError(t, err)
	require.Equal(t, ledger.Parent{Key: parent, State: ledger.Published, Reason: ledger.ReasonPublished, ObjectID: "obj-1"}, got[parent])
	require.Equal(t, ledger.Pending, got[reply].State)
}

// Authorize is the gate: a reply whose parent is not published is not authorized; its claim
// ends (awaiting_parent), no attempt is counted, and it is pending with no claim, so it can be
// woken and begun again. Once the parent is published it is authorized.
func TestAuthorizeHoldsAReplyUntilItsParentIsPublished(t *testing.T) {
	e := newEnv(t)
	parent := e.submit("first")
	reply := e.submitReply("second", parent)

	c, err := e.l.Begin(e.ctx, reply, requestHash("second"), lease)
	require.NoError(t, err)
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Pending, a.State)
	require.Equal(t, ledger.ReasonAwaitingParent, a.Reason)
	in := e.intent(reply)
	require.Zero(t, in.AttemptsAuthorized, "waiting spends no attempt")
	require.Nil(t, in.LeaseExpiresAt, "the claim ended")
	waiting, err := e.l.WaitingReplies(e.ctx, []identity.DeliveryKey{parent})
	require.NoError(t, err)
	require.Len(t, waiting, 1)
	require.Equal(t, reply, waiting[0].Key)
	require.Equal(t, parent, waiting[0].Parent)

	e.publish(parent, "first", "obj-1")
	e.publish(reply, "second", "obj-2")
	require.Equal(t, ledger.Published, e.state(reply))
	require.Equal(t, 1, e.intent(reply).AttemptsAuthorized)
}

// A claimed reply whose parent is parked is parked dependency_unmet by Authorize.
func TestAuthorizeParksAReplyWhoseParentIsParked(t *testing.T) {
	e := newEnv(t)
	parent := e.submit("first")
	reply := e.submitReply("second", parent)
	require.NoError(t, e.l.Park(e.ctx, parent, ledger.Actor{Name: "ops", Reason: "stop"}))

	c, err := e.l.Begin(e.ctx, reply, requestHash("second"), lease)
	require.NoError(t, err)
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Parked, a.State)
	require.Equal(t, ledger.ReasonDependencyUnmet, a.Reason)
	require.Zero(t, e.intent(reply).AttemptsAuthorized)
}

// ParkDependencyUnmet parks a pending reply whose parent is parked, or failed for a reason its
// policy does not retry, with a history row naming the parent and an outbox row; it leaves one
// whose parent waits, is published, or failed for a reason its policy retries.
func TestParkDependencyUnmetParksOnlyRepliesWhoseParentEnded(t *testing.T) {
	e := newEnv(t)
	e.setPolicy("retryable_reasons", []string{"connection_failed"})
	parked := e.submit("parked parent")
	require.NoError(t, e.l.Park(e.ctx, parked, ledger.Actor{Name: "ops", Reason: "stop"}))
	rejected, retried, waiting, published := e.submit("rejected parent"), e.submit("retried parent"), e.submit("waiting parent"), e.submit("published parent")
	for key, reason := range map[identity.DeliveryKey]ledger.Reason{rejected: ledger.ReasonPlatformRejected, retried: ledger.ReasonConnectionFailed} {
		text := map[identity.DeliveryKey]string{rejected: "rejected parent", retried: "retried parent"}[key]
		c, err := e.l.Begin(e.ctx, key, requestHash(text), lease)
		require.NoError(t, err)
		_, err = e.l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: reason})
		require.NoError(t, err)
		require.Equal(t, ledger.Failed, e.state(key))
	}
	e.publish(published, "published parent", "obj-1")

	replies := map[string]identity.DeliveryKey{}
	for name, parent := range map[string]identity.DeliveryKey{"parked": parked, "rejected": rejected, "retried": retried, "waiting": waiting, "published": published} {
		replies[name] = e.submitReply("reply to "+name, parent)
	}
	keys := make([]identity.DeliveryKey, 0, len(replies))
	for _, k := range replies {
		keys = append(keys, k)
	}
	got, err := e.l.ParkDependencyUnmet(e.ctx, keys)
	require.NoError(t, err)
	require.Equal(t, map[identity.DeliveryKey]bool{replies["parked"]: true, replies["rejected"]: true}, got)
	for name, key := range replies {
		want := ledger.Pending
		if name == "parked" || name == "rejected" {
			want = ledger.Parked
		}
		require.Equal(t, want, e.state(key), name)
	}
	in := e.intent(replies["rejected"])
	require.Equal(t, ledger.ReasonDependencyUnmet, in.Reason)
	require.Zero(t, e.attempts(replies["rejected"]), "no attempt was opened")
	var detail map[string]string
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT detail FROM history WHERE delivery_key = $1 AND reason = 'dependency_unmet'`, replies["rejected"].Bytes()).Scan(&detail))
	require.Equal(t, map[string]string{"reply_to": rejected.String(), "parent_state": "failed", "parent_reason": "platform_rejected"}, detail)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1 AND seq = $2`, replies["rejected"].Bytes(), in.Seq))

	// Parked is terminal: asked again, nothing changes.
	again, err := e.l.ParkDependencyUnmet(e.ctx, keys)
	require.NoError(t, err)
	require.Empty(t, again)
}

// A claimed reply (a live claim: its dispatcher is on its way to Authorize) is not parked here;
// Authorize decides it.
func TestParkDependencyUnmetLeavesAClaimedReply(t *testing.T) {
	e := newEnv(t)
	parent := e.submit("first")
	reply := e.submitReply("second", parent)
	_, err := e.l.Begin(e.ctx, reply, requestHash("second"), lease)
	require.NoError(t, err)
	require.NoError(t, e.l.Park(e.ctx, parent, ledger.Actor{Name: "ops", Reason: "stop"}))
	got, err := e.l.ParkDependencyUnmet(e.ctx, []identity.DeliveryKey{reply})
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, ledger.Pending, e.state(reply))
}

// The relay asks for the replies waiting for the intents of every round that publishes, parks
// or fails some: a batch of 128 parents, on a ledger of 10,000 intents of which 1,000 are
// replies, none waiting for these parents (the common case: no thread). What it costs per round.
func BenchmarkWaitingRepliesOfABatch(b *testing.B) {
	e, l := benchEnv(b, 1)
	var parents []identity.DeliveryKey
	for i := range 10 {
		var envs []identity.Envelope
		for j := range 1000 {
			env := envelope(b, account, fmt.Sprintf("bench %d/%d", i, j))
			if i == 9 {
				var err error
				env, err = env.InReplyTo(parents[j])
				require.NoError(b, err)
			}
			envs = append(envs, env)
		}
		res, err := l.Submit(e.ctx, envs)
		require.NoError(b, err)
		for _, r := range res {
			parents = append(parents, r.Key)
		}
	}
	e.exec(`ANALYZE intents`)
	batch := parents[5000 : 5000+128]
	b.ResetTimer()
	for range b.N {
		got, err := l.WaitingReplies(e.ctx, batch)
		require.NoError(b, err)
		require.Empty(b, got)
	}
}

// A reply the restored ledger lacks is recreated from its envelope as a reply: it still waits
// for its parent, never goes out as a post of its own.
func TestRestoreRecreatesAReplyWithItsParent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	parent := e.submit("first")
	env := envelope(t, account, "a reply submitted after the backup")
	env, err := env.InReplyTo(parent)
	require.NoError(t, err)
	tr, _ := stream(t, ledger.Pending)
	res := e.restore(env.DeliveryKey(), account, tr, &env, false)
	require.Equal(t, ledger.RestoreCreated, res.Verdict)
	require.Equal(t, parent, e.intent(env.DeliveryKey()).ReplyTo)
}
