package dispatch_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// No byte leaves before JetStream acknowledged the authorization (docs/design.md#the-witness). Here
// ATMOST_EVENTS disappears between Authorize and the send: the witness cannot be had, nothing
// is sent, and the attempt is completed as not sent, which is the truth.
func TestNothingIsSentWithoutTheWitnessOfTheAuthorization(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	key := e.Submit("acct-1", "no witness, no send")[0]
	var once sync.Once
	cfg := dispatch.WithHook(e.config(), func(step string) {
		if step == "after-authorize" {
			once.Do(func() { require.NoError(t, e.JS.DeleteStream(e.Ctx, events.EventsStream)) })
		}
	})
	e.run(cfg)
	e.requireUnsent(key, "witness")
}

// requireUnsent waits for key to settle and requires that its attempt was completed as not
// sent by the dispatcher itself, at step, with not a byte to the platform.
func (e *env) requireUnsent(key identity.DeliveryKey, step string) {
	e.T.Helper()
	in := e.settle([]identity.DeliveryKey{key}, 20*time.Second)[key]
	require.Equal(e.T, ledger.Failed, in.State)
	require.Equal(e.T, ledger.ReasonConnectionFailed, in.Reason)
	require.Zero(e.T, e.sim.Counts().Requests, "not a byte to the platform")
	rec, err := e.Ledger.Inspect(e.Ctx, key)
	require.NoError(e.T, err)
	require.Contains(e.T, string(rec.Evidence[len(rec.Evidence)-1].Detail), `"step": "`+step+`"`)
}

// A send that would start after its deadline (the in-flight lease less the margin) never
// starts: the worker is held between the witness and the first byte past the deadline, and the
// attempt is completed as not sent by the dispatcher's own check (step "deadline"), before the
// adapter is called.
func TestASendPastItsDeadlineNeverStarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	key := e.Submit("acct-1", "held past the deadline")[0]
	cfg := e.config()
	held := cfg.InFlightLease - cfg.Margin + 500*time.Millisecond
	cfg = dispatch.WithHook(cfg, func(step string) {
		if step == "before-send" {
			time.Sleep(held) // a paused worker: the deadline passes, the lease not yet
		}
	})
	e.run(cfg)
	e.requireUnsent(key, "deadline")
}

// While JetStream refuses the events, no attempt is authorized at all: the claims are
// witnessed first, and their failure makes the work wait (the claims expire, abandoned)
// instead of spending the attempt cap on sends that could not happen.
func TestNoAttemptIsAuthorizedWhileJetStreamRefusesEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.Submit("acct-1", worldtest.Texts("events down", 3)...)
	require.NoError(t, e.JS.DeleteStream(e.Ctx, events.EventsStream))
	e.run(e.config())
	time.Sleep(2 * time.Second)
	intents, err := e.Ledger.GetMany(e.Ctx, keys)
	require.NoError(t, err)
	require.Equal(t, map[ledger.State]int{ledger.Pending: 3}, states(intents))
	for _, in := range intents {
		require.Zero(t, in.AttemptsAuthorized)
	}
	require.Zero(t, e.sim.Counts().Requests)
}
