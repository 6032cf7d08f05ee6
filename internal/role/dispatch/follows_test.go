package dispatch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// keeping publishes and never removes what it published from the outbox: an ingester whose
// next write, which removes its rows, has not come yet.
type keeping struct{ *ledger.Ledger }

func (keeping) Published(context.Context, []ledger.Unpublished) ([]ledger.Unpublished, error) {
	return nil, nil
}

func (keeping) ForgetLater(context.Context, []ledger.Unpublished, func([]ledger.Unpublished)) error {
	return nil
}

// A work item that follows its intent's events (a writer's publication sent it once JetStream
// acknowledged them) leaves them to their publisher: the dispatcher publishes and removes its
// own transitions only, and the submission's row stays in the outbox for the ingester that
// published it, instead of being published a second time and removed by two processes, each
// removal waiting for the other's. A work item that promises nothing (the slow path's, the
// sweeper's) has the dispatcher publish and remove what the outbox holds of its intent.
func TestTheDispatcherLeavesWhatAWorkItemFollowsToItsPublisher(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	var envs []identity.Envelope
	for _, text := range []string{"followed", "unpromised"} {
		env, err := identity.ParseEnvelope([]byte(fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":%q}}`, text)))
		require.NoError(t, err)
		envs = append(envs, env)
	}
	res, err := e.Ledger.Submit(e.Ctx, envs)
	require.NoError(t, err)
	followed, unpromised := res[0].Key, res[1].Key
	require.NoError(t, relay.New(keeping{e.Ledger}, e.JS, relay.Config{}).PublishFor(e.Ctx, []identity.DeliveryKey{followed}))
	e.republishWork(unpromised, "sweep") // a sweeper's: its submission's event is not in the stream yet

	e.run(e.config())
	intents := e.settle([]identity.DeliveryKey{followed, unpromised}, 20*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 2}, states(intents))
	left := e.outboxComesTo(1)
	require.Equal(t, followed, left[0].Key, "the followed submission only: the dispatcher removed the rest")
	require.Equal(t, int64(1), left[0].Seq)
}

// outboxComesTo waits until the outbox holds n rows and returns them. The dispatcher removes
// what its publications got acknowledged with its next write, or on its own ForgetDelay
// after the last one: an intent is published (its Complete committed) a moment before its
// outcome's row leaves. No relay loop runs here, so a row the dispatcher left unpublished
// stays, and the wait ends with the count it saw.
func (e *env) outboxComesTo(n int) []ledger.Unpublished {
	e.T.Helper()
	var left []ledger.Unpublished
	deadline := time.Now().Add(10 * time.Second)
	for {
		var err error
		left, err = e.Ledger.Unpublished(e.Ctx, 10, 0)
		require.NoError(e.T, err)
		if len(left) == n || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Len(e.T, left, n, "the outbox's rows: %v", left)
	return left
}

// A work item that says it follows more than its intent holds (a bug, or a message someone
// else published on the dispatch subjects) vouches for nothing past the intent's latest
// transition: the dispatcher still publishes its own claim, authorization and outcome, and
// the intent is published.
func TestAWorkItemVouchesForNothingPastItsIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	env, err := identity.ParseEnvelope([]byte(`{"v":1,"account":"acct-1","action":"post","request":{"text":"overclaimed"}}`))
	require.NoError(t, err)
	res, err := e.Ledger.Submit(e.Ctx, []identity.Envelope{env})
	require.NoError(t, err)
	key := res[0].Key
	w := events.WorkItem{V: events.Version, DeliveryKey: key, Account: "acct-1", Event: events.NewID(key, 99), Follows: true}
	data, err := json.Marshal(w)
	require.NoError(t, err)
	_, err = e.JS.PublishMsg(e.Ctx, &nats.Msg{Subject: w.Subject(), Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{w.MsgID()}}})
	require.NoError(t, err)

	e.run(e.config())
	intents := e.settle([]identity.DeliveryKey{key}, 20*time.Second)
	require.Equal(t, ledger.Published, intents[key].State)
	left := e.outboxComesTo(1)
	require.Equal(t, int64(1), left[0].Seq, "the dispatcher published and removed its own transitions")
}
