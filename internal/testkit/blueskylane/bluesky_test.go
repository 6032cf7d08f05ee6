package blueskylane_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/testkit/blueskylane"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

const (
	posts   = "app.bsky.feed.post"
	likes   = "app.bsky.feed.like"
	reposts = "app.bsky.feed.repost"
	follows = "app.bsky.graph.follow"
)

// Every action the adapter speaks goes through ingest's ledger, the relay and the dispatcher to
// the reference PDS and is read back there: one createRecord per intent, one record per intent
// under the record key derived from its delivery key, and a redelivered work item sends nothing.
func TestEveryActionIsPublishedOnceOnARealPDS(t *testing.T) {
	t.Parallel()
	e := newLane(t)
	e.dispatcher()

	post := e.submit(envelope("post", "", map[string]any{"text": "Hello from atmost's Bluesky lane", "langs": []string{"en"}}))[0]
	in := e.await([]identity.DeliveryKey{post}, time.Minute, ledger.Published)[post]
	require.Equal(t, ledger.ReasonPublished, in.Reason)
	stored, ok := e.getRecord(posts, post)
	require.True(t, ok, "the PDS has no record under the post's record key")
	require.Equal(t, in.ObjectID, stored.URI, "the ledger names the record the PDS holds")
	require.Equal(t, "Hello from atmost's Bluesky lane", stored.Value["text"])
	require.Equal(t, posts, stored.Value["$type"])

	keys := e.submit(
		envelope("reply", stored.URI, map[string]any{"text": "and a reply to it", "parent": stored.ref(), "root": stored.ref()}),
		envelope("like", stored.URI, map[string]any{"subject": stored.ref()}),
		envelope("repost", stored.URI, map[string]any{"subject": stored.ref()}),
		envelope("follow", e.pds.FriendDID, map[string]any{}),
	)
	reply, like, repost, follow := keys[0], keys[1], keys[2], keys[3]
	intents := e.await(keys, time.Minute, ledger.Published)
	for _, k := range keys {
		require.Equal(t, ledger.ReasonPublished, intents[k].Reason, intents[k].Action)
	}

	r, ok := e.getRecord(posts, reply)
	require.True(t, ok, "no reply record")
	require.Equal(t, intents[reply].ObjectID, r.URI)
	require.Equal(t, "and a reply to it", r.Value["text"])
	require.Equal(t, map[string]any{"parent": toAny(stored.ref()), "root": toAny(stored.ref())}, r.Value["reply"])
	for _, c := range []struct {
		key        identity.DeliveryKey
		collection string
	}{{like, likes}, {repost, reposts}} {
		r, ok := e.getRecord(c.collection, c.key)
		require.True(t, ok, "no %s record", c.collection)
		require.Equal(t, intents[c.key].ObjectID, r.URI)
		require.Equal(t, toAny(stored.ref()), r.Value["subject"], c.collection)
	}
	f, ok := e.getRecord(follows, follow)
	require.True(t, ok, "no follow record")
	require.Equal(t, intents[follow].ObjectID, f.URI)
	require.Equal(t, e.pds.FriendDID, f.Value["subject"])

	// The repository holds exactly what was asked for, once.
	counts := func() map[string]int {
		return map[string]int{posts: len(e.listRecords(posts)), likes: len(e.listRecords(likes)), reposts: len(e.listRecords(reposts)), follows: len(e.listRecords(follows))}
	}
	want := map[string]int{posts: 2, likes: 1, reposts: 1, follows: 1}
	require.Equal(t, want, counts())
	require.EqualValues(t, 5, e.proxy.Forwarded(), "one createRecord per intent reached the PDS")

	// Every work item delivered again: the ledger refuses a second attempt, nothing is sent.
	for _, k := range append(keys, post) {
		e.republish(k)
	}
	e.drained()
	require.Equal(t, want, counts())
	require.EqualValues(t, 5, e.proxy.Forwarded(), "a redelivered work item sent nothing")
}

// A createRecord written whole whose connection dies before the answer: the PDS created the
// record, the adapter cannot know it, so the intent goes indeterminate and is never resent. The
// reconciler's one lookup (getRecord under the record key) finds the record, and the intent
// ends published. The PDS holds exactly one record.
func TestACreateRecordDroppedAfterTheRequestEndsPublishedByTheLookup(t *testing.T) {
	t.Parallel()
	e := newLane(t)
	e.dispatcher()

	e.proxy.DropNext(blueskylane.DropAfterRequest)
	key := e.submit(envelope("post", "", map[string]any{"text": "sent, and the answer lost"}))[0]
	in := e.await([]identity.DeliveryKey{key}, time.Minute, ledger.Indeterminate)[key]
	require.Equal(t, ledger.ReasonSendUnknown, in.Reason)
	require.EqualValues(t, 1, e.proxy.Dropped(), "the proxy dropped the connection")
	require.EqualValues(t, 1, e.proxy.Forwarded(), "the request reached the PDS once")
	stored, ok := e.getRecord(posts, key)
	require.True(t, ok, "the PDS created the record although its answer was lost")
	require.Equal(t, "sent, and the answer lost", stored.Value["text"])

	e.reconciler()
	in = e.await([]identity.DeliveryKey{key}, 30*time.Second, ledger.Published)[key]
	require.Equal(t, ledger.ReasonReconciledFound, in.Reason, "published by the lookup")
	require.Equal(t, stored.URI, in.ObjectID)
	last := e.lastTransition(key)
	require.Equal(t, ledger.Indeterminate, last.From)
	require.Equal(t, ledger.Published, last.To)
	require.Equal(t, "reconciler", last.Actor)

	rec, err := e.Ledger.Inspect(e.Ctx, key)
	require.NoError(t, err)
	require.Len(t, rec.Attempts, 1, "one attempt: the unknown outcome was never retried")
	steps := []string{}
	for _, s := range rec.Reconciliations {
		steps = append(steps, s.Step+":"+s.Result)
	}
	require.Equal(t, []string{"claimed:", "resolved:found"}, steps, "one lookup, claimed before it was made")

	require.Len(t, e.listRecords(posts), 1, "one record on the PDS")
	require.EqualValues(t, 1, e.proxy.Forwarded(), "no second createRecord")
}

// A createRecord whose connection dies before a byte reached the PDS, and one whose answer is
// lost after the PDS created the record, which a person then deletes: the adapter cannot tell
// either from the other (both unknown), and neither can the lookup, because the PDS answers
// RecordNotFound for both. So a not-found proves nothing: both intents are parked for a person
// (reconcile_not_found), never failed into a retry that would post the deleted one again, and
// the PDS never sees a second createRecord.
func TestARecordDeletedBeforeTheLookupIsParkedNeverSentAgain(t *testing.T) {
	t.Parallel()
	e := newLane(t)
	e.dispatcher()

	e.proxy.DropNext(blueskylane.DropBeforeRequest)
	lost := e.submit(envelope("post", "", map[string]any{"text": "lost on the way"}))[0]
	in := e.await([]identity.DeliveryKey{lost}, time.Minute, ledger.Indeterminate)[lost]
	require.Equal(t, ledger.ReasonSendUnknown, in.Reason)
	require.EqualValues(t, 0, e.proxy.Forwarded(), "nothing reached the PDS")

	e.proxy.DropNext(blueskylane.DropAfterRequest)
	deleted := e.submit(envelope("post", "", map[string]any{"text": "sent, the answer lost, then deleted by a person"}))[0]
	in = e.await([]identity.DeliveryKey{deleted}, time.Minute, ledger.Indeterminate)[deleted]
	require.Equal(t, ledger.ReasonSendUnknown, in.Reason)
	require.EqualValues(t, 1, e.proxy.Forwarded(), "the second request reached the PDS")
	_, ok := e.getRecord(posts, deleted)
	require.True(t, ok, "the PDS created the record although its answer was lost")
	e.deleteRecord(posts, bluesky.RecordKey(deleted))
	_, ok = e.getRecord(posts, deleted)
	require.False(t, ok, "the record is deleted")
	_, ok = e.getRecord(posts, lost)
	require.False(t, ok)

	keys := []identity.DeliveryKey{lost, deleted}
	e.reconciler()
	intents := e.await(keys, 30*time.Second, ledger.Parked)
	for _, k := range keys {
		require.Equal(t, ledger.ReasonReconcileNotFound, intents[k].Reason, "parked for a person: %s", k)
		last := e.lastTransition(k)
		require.Equal(t, ledger.Indeterminate, last.From)
		require.Equal(t, "reconciler", last.Actor)

		rec, err := e.Ledger.Inspect(e.Ctx, k)
		require.NoError(t, err)
		require.Len(t, rec.Attempts, 1, "one attempt: the unknown outcome was never retried")
		steps := []string{}
		for _, s := range rec.Reconciliations {
			steps = append(steps, s.Step+":"+s.Result)
		}
		require.Equal(t, []string{"claimed:", "resolved:not_found"}, steps, "one lookup, and its not-found proved nothing")
		var detail map[string]any
		require.NoError(t, json.Unmarshal(rec.Reconciliations[1].Detail, &detail))
		require.Equal(t, "RecordNotFound", detail["xrpc_error"], "the PDS's own answer")

		// Parked is a person's: no retry moves it, and a redelivered work item sends nothing.
		require.ErrorIs(t, e.Ledger.Retry(e.Ctx, k), ledger.ErrInvalidTransition)
		e.republish(k)
	}
	e.drained()

	// The adapter's own answer, asked once more: the same for both, and no proof of not-sent.
	ad := e.adapter()
	require.False(t, ad.Capabilities().StatusLookup, "the Bluesky adapter declares no status lookup")
	var answers []platform.Lookup
	for _, k := range keys {
		req, err := adapters.RequestOf(intents[k])
		require.NoError(t, err)
		lk := ad.Lookup(e.Ctx, req)
		require.Equal(t, platform.NotFound, lk.Result, lk.Detail)
		require.False(t, lk.ProvenNotSent, "a not-found on Bluesky proves nothing")
		require.Equal(t, "RecordNotFound", lk.Detail["xrpc_error"])
		answers = append(answers, lk)
	}
	require.Equal(t, answers[0].Result, answers[1].Result)
	require.Equal(t, answers[0].ProvenNotSent, answers[1].ProvenNotSent, "a lost request and a deleted record read the same")

	require.Empty(t, e.listRecords(posts), "no record on the PDS: the deleted post was never made again")
	require.EqualValues(t, 1, e.proxy.Forwarded(), "no second createRecord")
	after, err := e.Ledger.GetMany(e.Ctx, keys)
	require.NoError(t, err)
	for _, k := range keys {
		require.Equal(t, ledger.Parked, after[k].State, "still parked after the redelivery")
	}
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
