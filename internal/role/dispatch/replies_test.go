package dispatch_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// thread returns n posts of account, each after the first replying to the one before it
// (envelope reply_to), in order.
func thread(t testing.TB, account, prefix string, n int) []identity.Envelope {
	t.Helper()
	var out []identity.Envelope
	for i := range n {
		req, err := json.Marshal(map[string]string{"text": fmt.Sprintf("%s %d/%d", prefix, i+1, n)})
		require.NoError(t, err)
		e, err := identity.NewEnvelope(account, "post", "", req, "", nil)
		require.NoError(t, err)
		if i > 0 {
			e, err = e.InReplyTo(out[i-1].DeliveryKey())
			require.NoError(t, err)
		}
		out = append(out, e)
	}
	return out
}

// submitAll stores envelopes in one batch and publishes their work, as ingest would.
func (e *env) submitAll(envs []identity.Envelope) []identity.DeliveryKey {
	e.T.Helper()
	res, err := e.Ledger.Submit(e.Ctx, envs)
	require.NoError(e.T, err)
	keys := make([]identity.DeliveryKey, len(res))
	for i, r := range res {
		require.Equal(e.T, ledger.Created, r.Outcome)
		keys[i] = r.Key
	}
	_, err = e.Relay.Drain(e.Ctx)
	require.NoError(e.T, err)
	return keys
}

// A thread of 5 posts stored in one burst, its replies' work taken before their parents are
// published, is posted in order, each post replying to the object of the one before: one
// request and one attempt per post (a reply that waits opens none), and nothing polls.
func TestAThreadStoredInOneBurstIsPostedAsAChainInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.submitAll(thread(t, "acct-1", "thread", 5))
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, e.config())
	require.NoError(t, err)
	e.Run(d.Run)
	intents := e.settle(keys, 30*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 5}, states(intents))
	var previous platformsim.Object
	for i, k := range keys {
		require.Equal(t, 1, e.sim.Received(k.String()), "one request for post %d", i+1)
		objects := e.sim.Objects(k.String())
		require.Len(t, objects, 1)
		o := objects[0]
		require.Equal(t, intents[k].ObjectID, o.ID)
		if i == 0 {
			require.Empty(t, o.Target, "the first post replies to nothing")
		} else {
			require.Equal(t, previous.ID, o.Target, "post %d replies to post %d", i+1, i)
			require.False(t, o.CreatedAt.Before(previous.CreatedAt), "post %d was created after post %d", i+1, i)
		}
		previous = o
	}
	require.Equal(t, 5, e.Count(`SELECT count(*) FROM attempts`), "a reply that waits for its parent opens no attempt")
	require.Zero(t, e.Count(`SELECT count(*) FROM history WHERE reason = 'awaiting_parent'`), "the dispatcher never begins a reply whose parent is not published")
	// The replies were taken with their parents, in the first batch, and waited: their work
	// acknowledged, not delayed and taken again.
	require.Positive(t, dispatch.WorkCount(d, "awaiting_parent"), "replies taken before their parent was published waited")
	for _, again := range []string{"unpreparable", "staging_failed", "ledger_unavailable"} {
		require.Zero(t, dispatch.WorkCount(d, again), "no reply's work came back as %s", again)
	}
}

// A reply whose parent is parked is parked dependency_unmet: no request reaches the platform and
// no attempt is opened; its history names the parent.
func TestAReplyToAParkedParentIsParkedWithoutARequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	envs := thread(t, "acct-1", "parked", 2)
	parent := e.submitAll(envs[:1])[0]
	require.NoError(t, e.Ledger.Park(e.Ctx, parent, ledger.Actor{Name: "ops", Reason: "not this thread"}))
	reply := e.submitAll(envs[1:])[0]
	e.run(e.config())
	in := e.settle([]identity.DeliveryKey{reply}, 20*time.Second)[reply]
	require.Equal(t, ledger.Parked, in.State)
	require.Equal(t, ledger.ReasonDependencyUnmet, in.Reason)
	require.Zero(t, e.sim.Received(reply.String()), "no platform request")
	require.Empty(t, e.sim.Counts().Received, "no platform request at all")
	require.Zero(t, e.Count(`SELECT count(*) FROM attempts WHERE delivery_key = $1`, reply.Bytes()))
}

// A reply that waits is woken by its parent's end: stored while its parent is pending, it waits
// (its work acknowledged), and the parent's parking, relayed, brings it back and parks it.
func TestAWaitingReplyIsWokenByItsParentsEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	envs := thread(t, "acct-1", "woken", 2)
	// The parent's work is consumed by nobody: only the reply's reaches the dispatcher.
	res, err := e.Ledger.Submit(e.Ctx, envs[:1])
	require.NoError(t, err)
	parent := res[0].Key
	e.Exec(`DELETE FROM outbox WHERE delivery_key = $1`, parent.Bytes())
	reply := e.submitAll(envs[1:])[0]
	e.run(e.config())
	e.drained()
	require.Equal(t, ledger.Pending, e.Intent(reply).State, "the reply waits")

	require.NoError(t, e.Ledger.Park(e.Ctx, parent, ledger.Actor{Name: "ops", Reason: "not this thread"}))
	_, err = e.Relay.Drain(e.Ctx)
	require.NoError(t, err)
	in := e.settle([]identity.DeliveryKey{reply}, 20*time.Second)[reply]
	require.Equal(t, ledger.ReasonDependencyUnmet, in.Reason)
	require.Empty(t, e.sim.Counts().Received)
}
