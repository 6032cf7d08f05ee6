package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// misreporting is the sim adapter with a bug: it sends for real, then reports "not sent" with
// a reason that only an unknown outcome may carry, which the ledger refuses to record.
type misreporting struct{ platform.Adapter }

func (m misreporting) Send(ctx context.Context, p platform.Prepared) platform.Outcome {
	o := m.Adapter.Send(ctx, p)
	o.Result, o.Reason = platform.NotSent, platform.ReasonSendUnknown
	return o
}

// An outcome the ledger refuses does not block the batch it came with or the completions
// behind it: it is recorded as unknown (indeterminate: reconciled, never resent), the others
// as they were.
func TestAnOutcomeTheLedgerRefusesIsRecordedAsUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.Submit("acct-1", worldtest.Texts("misreported", 5)...)
	cfg := e.config()
	cfg.Platforms = platform.Registry{sim.Name: func(a platform.Account) (platform.Adapter, error) {
		ad, err := sim.Open(a)
		return misreporting{ad}, err
	}}
	e.run(cfg)
	intents := e.settle(keys, 20*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Indeterminate: 5}, states(intents))
	for _, k := range keys {
		require.Equal(t, ledger.ReasonSendUnknown, intents[k].Reason)
		require.Equal(t, 1, e.sim.Created(k.String()))
		rec, err := e.Ledger.Inspect(e.Ctx, k)
		require.NoError(t, err)
		require.Contains(t, string(rec.Evidence[len(rec.Evidence)-1].Detail), "refused_outcome")
	}
}

// picky is the sim adapter for a platform that knows only posts: any other action cannot be
// rendered (platform.ErrUnsendable), and its first Open fails as a broken configuration would.
type picky struct{ platform.Adapter }

func (p picky) Prepare(r platform.Request) (platform.Prepared, error) {
	if r.Action != "post" {
		return platform.Prepared{}, fmt.Errorf("picky: no action %q here: %w", r.Action, platform.ErrUnsendable)
	}
	return p.Adapter.Prepare(r)
}

// A request the platform cannot render is parked for a human at once (request_unsendable): no
// attempt, no send, never retried. An adapter that cannot be opened (a configuration to fix)
// makes the work wait instead, and it goes through once the adapter opens.
func TestAnUnsendableRequestIsParkedAndABrokenConfigurationWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	posts := e.Submit("acct-1", worldtest.Texts("a post", 3)...)
	var likes []identity.DeliveryKey
	for i := range 2 {
		env, err := identity.ParseEnvelope([]byte(fmt.Sprintf(`{"v":1,"account":"acct-1","action":"like","target":"post-%d","request":{}}`, i)))
		require.NoError(t, err)
		res, err := e.Ledger.Submit(e.Ctx, []identity.Envelope{env})
		require.NoError(t, err)
		likes = append(likes, res[0].Key)
	}
	_, err := e.Relay.Drain(e.Ctx)
	require.NoError(t, err)
	var opens atomic.Int32
	cfg := e.config()
	cfg.Platforms = platform.Registry{sim.Name: func(a platform.Account) (platform.Adapter, error) {
		if opens.Add(1) <= 2 {
			return nil, errors.New("picky: the configuration is being fixed")
		}
		ad, err := sim.Open(a)
		return picky{ad}, err
	}}
	e.run(cfg)
	intents := e.settle(append(posts, likes...), 20*time.Second)
	for _, k := range posts {
		require.Equal(t, ledger.Published, intents[k].State, "the posts waited for the adapter, then went")
		require.Equal(t, 1, e.sim.Created(k.String()))
	}
	for _, k := range likes {
		in := intents[k]
		require.Equal(t, ledger.Parked, in.State)
		require.Equal(t, ledger.ReasonRequestUnsendable, in.Reason)
		require.Zero(t, in.AttemptsAuthorized)
		require.Zero(t, e.sim.Received(k.String()))
		rec, err := e.Ledger.Inspect(e.Ctx, k)
		require.NoError(t, err)
		require.Empty(t, rec.Attempts, "no attempt was opened")
		require.Contains(t, string(rec.Transitions[len(rec.Transitions)-1].Detail), "no action")
	}
	require.GreaterOrEqual(t, opens.Load(), int32(3))
	e.drained()
	require.Zero(t, e.Count(`SELECT count(*) FROM outbox`), "the parking was published")
}

// preparing is the sim adapter counting the requests it renders, per text.
type preparing struct {
	platform.Adapter
	rendered *sync.Map
}

func (p preparing) Prepare(r platform.Request) (platform.Prepared, error) {
	p.rendered.Store(r.Text, true)
	return p.Adapter.Prepare(r)
}

// The freshness fence stands in front of the expensive work: a backlog of intents resting on
// versions of a source that newer versions superseded is parked (superseded_source) before any
// request is rendered or any attempt opened; only the intent on the stored head is sent.
func TestIntentsOnASupersededSourceAreParkedBeforeAnyWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	const src = "https://example.org/feed"
	var versions []identity.DeliveryKey
	for i := range 4 {
		version, _, err := identity.NewSourceVersion(src, fmt.Sprintf("the feed, edition %d", i))
		require.NoError(t, err)
		env, err := identity.ParseEnvelope([]byte(fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":"edition %d"},"source":{"id":%q,"version":%q}}`,
			i, src, version)))
		require.NoError(t, err)
		res, err := e.Ledger.Submit(e.Ctx, []identity.Envelope{env})
		require.NoError(t, err)
		versions = append(versions, res[0].Key)
	}
	plain := e.Submit("acct-1", "no source")
	_, err := e.Relay.Drain(e.Ctx)
	require.NoError(t, err)
	rendered := &sync.Map{}
	cfg := e.config()
	cfg.Platforms = platform.Registry{sim.Name: func(a platform.Account) (platform.Adapter, error) {
		ad, err := sim.Open(a)
		return preparing{ad, rendered}, err
	}}
	e.run(cfg)
	intents := e.settle(append(versions, plain...), 20*time.Second)
	head := versions[len(versions)-1]
	require.Equal(t, ledger.Published, intents[head].State, "the stored head is sent")
	require.Equal(t, ledger.Published, intents[plain[0]].State)
	for i, k := range versions[:len(versions)-1] {
		in := intents[k]
		require.Equal(t, ledger.Parked, in.State, "edition %d", i)
		require.Equal(t, ledger.ReasonSupersededSource, in.Reason)
		rec, err := e.Ledger.Inspect(e.Ctx, k)
		require.NoError(t, err)
		require.Empty(t, rec.Attempts, "edition %d: no attempt was opened", i)
		_, ok := rendered.Load(fmt.Sprintf("edition %d", i))
		require.False(t, ok, "edition %d: its request was never rendered", i)
		require.Zero(t, e.sim.Received(k.String()))
	}
	e.drained()
	require.Zero(t, e.Count(`SELECT count(*) FROM outbox`), "the parkings were published")
}
