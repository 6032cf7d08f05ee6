package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// errLost is what a reconciler hears of a write whose COMMIT went through while the
// connection to the database was cut: nothing but an error.
var errLost = errors.New("conn closed (injected: the write committed, its answer was lost)")

// lossyLedger is the real ledger behind a connection that loses the answers to some of the
// reconciler's writes after they committed: the first claims of each key, and its results' writes
// for the first lostFor after the first of them.
type lossyLedger struct {
	*ledger.Ledger
	lostClaims int
	lostFor    time.Duration
	// down: the database is out of reach for the results' writes, which do not land.
	down atomic.Bool

	mu      sync.Mutex
	claims  map[identity.DeliveryKey]int
	resolve map[identity.DeliveryKey]time.Time
}

func (l *lossyLedger) ClaimReconciliation(ctx context.Context, key identity.DeliveryKey, token ledger.ClaimToken) (ledger.Reconciliation, error) {
	r, err := l.Ledger.ClaimReconciliation(ctx, key, token)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.claims[key]++
	if err == nil && l.claims[key] <= l.lostClaims {
		return ledger.Reconciliation{}, errLost
	}
	return r, err
}

func (l *lossyLedger) ResolveReconciliation(ctx context.Context, r ledger.Reconciliation, result ledger.LookupResult, objectID string, detail map[string]any) (ledger.State, error) {
	if l.down.Load() {
		return "", errors.New("dial tcp: connection refused (injected)")
	}
	state, err := l.Ledger.ResolveReconciliation(ctx, r, result, objectID, detail)
	l.mu.Lock()
	defer l.mu.Unlock()
	first, ok := l.resolve[r.Key]
	if !ok {
		first = time.Now()
		l.resolve[r.Key] = first
	}
	if err == nil && time.Since(first) < l.lostFor {
		return "", errLost
	}
	return state, err
}

// runLossy starts a reconciler on l whose accounts open through a, logging to an observer.
func (e *env) runLossy(l *lossyLedger, a *adapter) *observer.ObservedLogs {
	e.T.Helper()
	return e.runLossyWith(e.config(), l, a)
}

func (e *env) runLossyWith(cfg reconcile.Config, l *lossyLedger, a *adapter) *observer.ObservedLogs {
	e.T.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	real, err := ledger.New(e.DB.AppPool(e.T), ledger.Config{Actor: "reconciler-lossy"})
	require.NoError(e.T, err)
	l.Ledger = real
	l.claims, l.resolve = map[identity.DeliveryKey]int{}, map[identity.DeliveryKey]time.Time{}
	a.lookups = map[identity.DeliveryKey]int{}
	cfg.Logger = zap.New(core)
	cfg.Platforms = a.platforms()
	r, err := reconcile.New(e.Ctx, e.JS, l, relay.New(real, e.JS, relay.Config{}), cfg)
	require.NoError(e.T, err)
	e.Run(r.Run)
	return logs
}

// A claim whose answer was lost is the reconciler's own: it asks again with its token, makes
// the one lookup and publishes the post it finds, instead of leaving the intent to a person.
func TestALostClaimAnswerStillGetsItsOneLookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit, platformsim.FaultDropAfterCommit}}})
	keys := e.dispatched("claimed, answer lost", "claimed, answer lost twice more")
	a := &adapter{}
	logs := e.runLossy(&lossyLedger{lostClaims: 3}, a)
	intents := e.settle(keys, 20*time.Second)
	for _, k := range keys {
		require.Equal(t, ledger.Published, intents[k].State, "%s", k)
		require.Equal(t, ledger.ReasonReconciledFound, intents[k].Reason)
		require.Equal(t, 1, a.count(k), "one lookup for %s", k)
		require.Equal(t, 1, e.sim.Created(k.String()))
	}
	require.Equal(t, len(keys), e.Count(`SELECT count(*) FROM reconciliations WHERE step = 'claimed'`))
	require.Equal(t, len(keys), logs.FilterMessage("the claim had committed though its answer was lost; the lookup is this reconciler's").Len())
	require.Zero(t, logs.FilterLevelExact(zapcore.ErrorLevel).Len(), "no ERROR for writes that landed: %v", logs.FilterLevelExact(zapcore.ErrorLevel).All())
	e.eventsMatchHistory()
}

// The write of a lookup's result whose answer is lost for longer than a turn's retries is
// kept and written again on a later turn: the intent ends as the lookup found, the lookup is
// not made again, and nothing is logged as an ERROR, since the write had landed.
func TestALostResultAnswerIsRecordedWithoutASecondLookup(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit}}})
	key := e.dispatched("looked up, answer lost")[0]
	a := &adapter{}
	logs := e.runLossy(&lossyLedger{lostFor: time.Second}, a)
	in := e.settle([]identity.DeliveryKey{key}, 20*time.Second)[key]
	require.Equal(t, ledger.Published, in.State)
	require.Equal(t, ledger.ReasonReconciledFound, in.Reason)
	require.Equal(t, 1, a.count(key), "one lookup")
	require.Eventually(t, func() bool {
		return logs.FilterMessage("reconciled").Len() == 1
	}, 10*time.Second, 20*time.Millisecond, "a later turn writes the held result again and learns that it had landed")
	require.Positive(t, logs.FilterMessageSnippet("it is kept here and recorded on a later turn").Len())
	require.Zero(t, logs.FilterLevelExact(zapcore.ErrorLevel).Len(), "no ERROR for a write that landed: %v", logs.FilterLevelExact(zapcore.ErrorLevel).All())
	e.eventsMatchHistory()
}

// A lookup claimed by a turn of the scan, whose answer was lost, is taken up again by the next
// scan, although the ledger's candidates leave out every claimed lookup and no event will come.
func TestTheScanTakesUpALostClaimAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit}}})
	key := e.dispatched("its event was lost, then its claim's answer")[0]
	stream, err := e.JS.Stream(e.Ctx, events.EventsStream)
	require.NoError(t, err)
	require.NoError(t, stream.Purge(e.Ctx, jetstream.WithPurgeSubject(events.StateSubjects(string(ledger.Indeterminate)))))
	e.Exec(`UPDATE intents SET updated_at = now() - INTERVAL '2 minutes' WHERE delivery_key = $1`, key.Bytes())
	cfg := e.config()
	cfg.ScanAfter, cfg.ScanInterval = time.Minute, 300*time.Millisecond
	a := &adapter{}
	e.runLossyWith(cfg, &lossyLedger{lostClaims: 3}, a)
	in := e.settle([]identity.DeliveryKey{key}, 20*time.Second)[key]
	require.Equal(t, ledger.Published, in.State)
	require.Equal(t, 1, a.count(key))
}

// A held result that never landed, of an intent a person parked meanwhile, is not dropped as if
// it had: the ledger refuses it, and the ERROR says what the one lookup found, since the person
// deciding needs it (a post that exists, resolved as failed and retried, would be a second).
func TestAHeldResultOfAnIntentParkedMeanwhileIsReportedWithWhatItFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit}}})
	key := e.dispatched("found, then parked while the ledger was away")[0]
	a := &adapter{}
	l := &lossyLedger{}
	l.down.Store(true)
	logs := e.runLossy(l, a)
	require.Eventually(t, func() bool {
		return logs.FilterMessageSnippet("it is kept here and recorded on a later turn").Len() > 0
	}, 20*time.Second, 20*time.Millisecond, "the result is held")
	require.NoError(t, e.Ledger.Park(e.Ctx, key, ledger.Actor{Name: "user:alice", Reason: "looking into it by hand"}))
	l.down.Store(false)
	require.Eventually(t, func() bool {
		return logs.FilterMessage("the ledger refused the lookup's result; a person decides with what it found").Len() == 1
	}, 20*time.Second, 20*time.Millisecond, "the refused result is reported")
	entry := logs.FilterMessage("the ledger refused the lookup's result; a person decides with what it found").All()[0]
	require.NotEmpty(t, entry.ContextMap()["object_id"], "what the lookup found")
	require.Equal(t, string(ledger.Found), entry.ContextMap()["result"])
	require.Equal(t, ledger.Parked, e.Intent(key).State)
	require.Equal(t, 1, a.count(key), "one lookup")
}

// An unconfirmed claim this process holds for an attempt the intent has since left is no one's
// lookup: the new attempt's turn starts afresh, with the evidence and the reconcile delay, and
// never goes straight to a lookup under the old token.
func TestAHeldClaimOfAnAttemptTheIntentLeftIsDropped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit}}})
	key := e.dispatched("indeterminate, and held for an earlier attempt")[0]
	a := &adapter{}
	cfg := e.config()
	cfg.Platforms = a.platforms()
	a.lookups = map[identity.DeliveryKey]int{}
	r, err := reconcile.New(e.Ctx, e.JS, e.Ledger, e.Relay, cfg)
	require.NoError(t, err)
	e.Exec(`UPDATE accounts SET settings = jsonb_set(settings, '{reconcile_delay}', '"20s"')`)
	earlier, err := identity.NewAttemptToken()
	require.NoError(t, err)
	token, err := ledger.NewClaimToken()
	require.NoError(t, err)
	reconcile.Hold(r, key, token, earlier)
	v := r.Reconcile(e.Ctx, key)
	require.Equal(t, "waiting_delay", v.Result)
	require.Zero(t, a.count(key), "no lookup before the delay")
}

// platforms opens every sim account through a.
func (a *adapter) platforms() platform.Registry {
	return platform.Registry{sim.Name: func(acct platform.Account) (platform.Adapter, error) {
		ad, err := sim.Open(acct)
		a.Adapter = ad
		return a, err
	}}
}

// gatesDown is the real ledger whose reads of accounts' settings fail, as a database out of reach does.
type gatesDown struct{ *ledger.Ledger }

func (gatesDown) Gates(context.Context, []string) (map[string]ledger.Gate, error) {
	return nil, errors.New("dial tcp 127.0.0.1:5432: connection refused (injected)")
}

// A failed read of the account's settings is the database's trouble, and says so: an operator
// told the adapter cannot be opened would look at the account's configuration instead.
func TestAFailedReadOfTheAccountIsTheLedgersNotTheAdapters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultDropAfterCommit}}})
	key := e.dispatched("its account unreadable for now")[0]
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := e.config()
	cfg.Logger = zap.New(core)
	r, err := reconcile.New(e.Ctx, e.JS, gatesDown{e.Ledger}, e.Relay, cfg)
	require.NoError(t, err)
	v := r.Reconcile(e.Ctx, key)
	require.Equal(t, "ledger_error", v.Result)
	require.Equal(t, 1, logs.FilterMessage("reading the account's settings from the ledger failed; trying again later").Len())
	require.Zero(t, logs.FilterMessageSnippet("cannot be opened").Len())
}
