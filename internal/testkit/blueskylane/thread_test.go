package blueskylane_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// threadEnvelopes returns n posts of the lane's account, each after the first naming the one
// before it as reply_to, in order.
func threadEnvelopes(t testing.TB, prefix string, n int) []string {
	t.Helper()
	var out []string
	var previous identity.DeliveryKey
	for i := range n {
		m := map[string]any{"v": 1, "account": account, "action": "post", "request": map[string]any{"text": fmt.Sprintf("%s %d/%d", prefix, i+1, n)}}
		if i > 0 {
			m["reply_to"] = previous.String()
		}
		raw, err := json.Marshal(m)
		require.NoError(t, err)
		env, err := identity.ParseEnvelope(raw)
		require.NoError(t, err)
		previous = env.DeliveryKey()
		out = append(out, string(raw))
	}
	return out
}

// A thread of 5 posts stored in one burst is, on the PDS, a chain of replies in order: read back
// from the PDS's own records, post i+1's reply.parent is post i (uri and cid) and its reply.root
// is post 1; post 1 is no reply. One createRecord per post reached the PDS.
func TestAThreadOfFivePostsIsAChainOfRepliesOnARealPDS(t *testing.T) {
	t.Parallel()
	e := newLane(t)
	e.dispatcher()

	keys := e.submit(threadEnvelopes(t, "atmost's thread on the Bluesky lane", 5)...)
	intents := e.await(keys, 2*time.Minute, ledger.Published)
	var chain []record
	for i, k := range keys {
		require.Equal(t, ledger.ReasonPublished, intents[k].Reason, "post %d", i+1)
		r, ok := e.getRecord(posts, k)
		require.True(t, ok, "post %d: no record under its record key", i+1)
		require.Equal(t, intents[k].ObjectID, r.URI)
		require.Equal(t, fmt.Sprintf("atmost's thread on the Bluesky lane %d/5", i+1), r.Value["text"])
		chain = append(chain, r)
	}
	require.Nil(t, chain[0].Value["reply"], "the first post is no reply")
	for i := 1; i < len(chain); i++ {
		require.Equal(t, map[string]any{"parent": toAny(chain[i-1].ref()), "root": toAny(chain[0].ref())}, chain[i].Value["reply"],
			"post %d replies to post %d, in the thread of post 1", i+1, i)
	}
	require.Len(t, e.listRecords(posts), 5)
	require.EqualValues(t, 5, e.proxy.Forwarded(), "one createRecord per post reached the PDS")
	t.Logf("the thread on the PDS: %s", func() string {
		s := ""
		for _, r := range chain {
			s += "\n  " + r.URI
		}
		return s
	}())
}

// A reply whose parent is parked is parked dependency_unmet, and no request reaches the PDS.
func TestAReplyToAParkedParentSendsNothingToAPDS(t *testing.T) {
	t.Parallel()
	e := newLane(t)
	envs := threadEnvelopes(t, "a thread stopped", 2)
	parent := e.submit(envs[0])[0]
	require.NoError(t, e.Ledger.Park(e.Ctx, parent, ledger.Actor{Name: "ops", Reason: "not this thread"}))
	reply := e.submit(envs[1])[0]
	e.dispatcher()
	in := e.await([]identity.DeliveryKey{reply}, time.Minute, ledger.Parked)[reply]
	require.Equal(t, ledger.ReasonDependencyUnmet, in.Reason)
	e.drained()
	require.Zero(t, e.proxy.Forwarded(), "no request reached the PDS")
	require.Empty(t, e.listRecords(posts))
}
