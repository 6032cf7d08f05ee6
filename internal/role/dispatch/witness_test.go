package dispatch_test

import (
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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

// The witness's acknowledgement names the stream sequence of the authorized event, and the
// outcome records it with the evidence: where the dispatcher's own publish stored the event,
// and, where a relay round had already published it (and removed it from the outbox), the
// sequence of that first copy, which JetStream names when it drops the dispatcher's publish as
// a duplicate. A restored ledger names with it a message stored before the send.
func TestTheWitnessRecordsTheSequenceOfTheAuthorizedEventJetStreamHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.Submit("acct-1", "witnessed by the dispatcher's publish", "published by a relay round before the witness")
	own, first := keys[0], keys[1]
	var (
		mu       sync.Mutex
		original uint64
	)
	cfg := dispatch.WithHook(e.config(), func(step string) {
		mu.Lock()
		defer mu.Unlock()
		if step != "after-authorize" || original != 0 || e.Intent(first).State != ledger.Authorized {
			return
		}
		// The role's relay loop takes the authorized transition first, and more events follow
		// it on the stream.
		require.NoError(t, e.Relay.PublishFor(e.Ctx, []identity.DeliveryKey{first}))
		require.Zero(t, e.Count(`SELECT count(*) FROM outbox WHERE delivery_key = $1`, first.Bytes()))
		original = e.sequenceOf(events.NewID(first, 3))
		_, err := e.JS.Publish(e.Ctx, events.EventSubject("pending", "acct-1"), []byte(`{"after":"the first copy"}`))
		require.NoError(t, err)
	})
	e.run(cfg)
	intents := e.settle(keys, 20*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 2}, states(intents))
	require.NotZero(t, original, "the relay round never ran before the witness")
	witnessSeq := func(key identity.DeliveryKey) uint64 {
		return uint64(e.Count(`SELECT witness_seq FROM attempt_evidence WHERE delivery_key = $1 AND outcome = 'success'`, key.Bytes()))
	}
	require.Equal(t, e.sequenceOf(events.NewID(own, 3)), witnessSeq(own))
	require.Equal(t, original, witnessSeq(first), "the sequence of the copy JetStream held, not of a new one")
}

// sequenceOf returns the stream sequence of the one message on ATMOST_EVENTS with Nats-Msg-Id id.
func (e *env) sequenceOf(id events.ID) uint64 {
	e.T.Helper()
	stream, err := e.JS.Stream(e.Ctx, events.EventsStream)
	require.NoError(e.T, err)
	info, err := stream.Info(e.Ctx)
	require.NoError(e.T, err)
	var found []uint64
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(e.Ctx, seq)
		require.NoError(e.T, err)
		if m.Header.Get(jetstream.MsgIDHeader) == string(id) {
			found = append(found, seq)
		}
	}
	require.Len(e.T, found, 1, "%s is on the stream once", id)
	return found[0]
}
