package dispatch_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// Read-backs are grouped: the objects of many sends are read in one request, and each is
// still confirmed against its own intent's text.
func TestReadBacksAreGroupedAndEachObjectIsConfirmed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.Submit("acct-1", worldtest.Texts("grouped", 150)...)
	cfg := e.config()
	cfg.Batch, cfg.Concurrency = 64, 128
	e.run(cfg)
	intents := e.settle(keys, 30*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 150}, states(intents))
	c := e.sim.Counts()
	require.Positive(t, c.GroupedReads, "the sim adapter reads in groups")
	require.Less(t, c.GroupedReads, 150, "fewer grouped reads than objects: reads were grouped")
	for _, k := range keys {
		require.Equal(t, 1, e.sim.Created(k.String()))
	}
}

// The sends of a batch return moments apart; the read loop waits for those still under way
// (at most the linger) instead of reading back the first on its own, and the completion loop
// waits for the verdicts of a grouped read delivered with the first: one grouped read and one
// Complete for the batch. One create of eight is held 300 ms by the platform; the linger is
// longer, so the read waits for it.
func TestABatchsSendsAreReadBackAndRecordedTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{
		Script: []platformsim.Fault{platformsim.FaultOK, platformsim.FaultOK, platformsim.FaultDelay},
		Delay:  300 * time.Millisecond,
	}})
	keys := e.Submit("acct-1", worldtest.Texts("together", 8)...)
	cfg := e.config()
	cfg.Batch, cfg.Linger = 8, time.Second
	cfg = dispatch.WithTakeGap(cfg, time.Second) // the eight are one batch however they arrive
	cfg = dispatch.WithoutTrials(cfg)            // and none waits for a cold account's trial
	cfg.ReadBackTimeout, cfg.InFlightLease = 3*time.Second, 10*time.Second
	e.run(cfg)
	intents := e.settle(keys, 30*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 8}, states(intents))
	require.Equal(t, 1, e.sim.Counts().GroupedReads, "the batch's objects were read back in one request")
	// A transaction's rows carry its id (xmin): the published transitions were written by one.
	require.Equal(t, 1, e.Count(`SELECT count(DISTINCT xmin::TEXT) FROM history WHERE to_state = 'published'`),
		"the batch's outcomes were recorded in one Complete")
}

// twisted wraps the simulator's adapter: its grouped reads change the text of the objects
// whose request text starts with "twist", answer "not found" once for those starting with
// "late", as a platform slow to show a new object would, and answer with another object of
// the same text for those starting with "swap", which a read alone then never finds.
type twisted struct {
	platform.Adapter
	mu   sync.Mutex
	late map[string]bool // objects already answered "not found" once
}

func (tw *twisted) ReadBackMany(ctx context.Context, items []platform.ReadItem) []platform.ReadResult {
	out := tw.Adapter.(platform.ManyReader).ReadBackMany(ctx, items)
	tw.mu.Lock()
	defer tw.mu.Unlock()
	for i, it := range items {
		switch {
		case out[i].Err == nil && strings.HasPrefix(it.Request.Text, "twist"):
			out[i].Object.Text += " (edited by the platform)"
		case out[i].Err == nil && strings.HasPrefix(it.Request.Text, "late") && !tw.late[it.ObjectID]:
			tw.late[it.ObjectID] = true
			out[i] = platform.ReadResult{Err: platform.ErrNotFound}
		case out[i].Err == nil && strings.HasPrefix(it.Request.Text, "swap"):
			out[i].Object.ID = "obj_someone_else"
		}
	}
	return out
}

func (tw *twisted) ReadBack(ctx context.Context, r platform.Request, objectID string) (platform.Object, error) {
	if strings.HasPrefix(r.Text, "swap") {
		return platform.Object{}, platform.ErrNotFound
	}
	return tw.Adapter.ReadBack(ctx, r, objectID)
}

// A grouped read that finds other text, or answers about another object than the one asked
// for, does not confirm (the intent goes indeterminate, to be reconciled, never resent), and
// an object a grouped read could not find yet is read again on its own and confirmed.
func TestAGroupedReadBackJudgesEachObjectAndRereadsWhatItCouldNotFind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	twistedKeys := e.Submit("acct-1", worldtest.Texts("twist", 20)...)
	lateKeys := e.Submit("acct-1", worldtest.Texts("late", 20)...)
	plainKeys := e.Submit("acct-1", worldtest.Texts("plain", 20)...)
	swappedKeys := e.Submit("acct-1", worldtest.Texts("swap", 10)...)
	cfg := e.config()
	cfg.Platforms = platform.Registry{sim.Name: func(a platform.Account) (platform.Adapter, error) {
		ad, err := sim.Open(a)
		if err != nil {
			return nil, err
		}
		return &twisted{Adapter: ad, late: map[string]bool{}}, nil
	}}
	e.run(cfg)
	all := append(append(append(append([]identity.DeliveryKey{}, twistedKeys...), lateKeys...), plainKeys...), swappedKeys...)
	intents := e.settle(all, 30*time.Second)
	for _, k := range twistedKeys {
		require.Equal(t, ledger.Indeterminate, intents[k].State, "%s: other text is not a confirmation", k)
		require.Equal(t, ledger.ReasonReadbackMismatch, intents[k].Reason)
	}
	for _, k := range swappedKeys {
		require.Equal(t, ledger.Indeterminate, intents[k].State, "%s: another object is not a confirmation", k)
	}
	for _, k := range append(lateKeys, plainKeys...) {
		require.Equal(t, ledger.Published, intents[k].State, "%s", k)
	}
	for _, k := range all {
		require.Equal(t, 1, e.sim.Created(k.String()), "one object for %s", k)
		require.Equal(t, 1, e.sim.Received(k.String()), "one request for %s", k)
	}
}

// short answers its grouped reads for all but the last object.
type short struct{ platform.Adapter }

func (s short) ReadBackMany(ctx context.Context, items []platform.ReadItem) []platform.ReadResult {
	out := s.Adapter.(platform.ManyReader).ReadBackMany(ctx, items)
	return out[:len(out)-1]
}

// deaf never answers a grouped read, whatever its context says.
type deaf struct{ platform.Adapter }

func (deaf) ReadBackMany(context.Context, []platform.ReadItem) []platform.ReadResult {
	select {}
}

// unhashable is an adapter value that cannot be a map key.
type unhashable struct {
	platform.Adapter
	seen map[string]bool
}

func (u unhashable) ReadBackMany(ctx context.Context, items []platform.ReadItem) []platform.ReadResult {
	return u.Adapter.(platform.ManyReader).ReadBackMany(ctx, items)
}

// Adapters that break the grouped read's contract (answering for the wrong number of objects,
// ignoring their context) or cannot be told apart as map keys cost their objects a read alone,
// never a confirmation, a stuck dispatcher or a panic. The deaf adapter's reads spend their
// budget waiting, so what their read alone cannot confirm in time goes indeterminate.
func TestGroupedReadBacksSurviveAdaptersThatBreakTheirContract(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		wrap      func(platform.Adapter) platform.Adapter
		published bool // every intent ends published
	}{
		"wrong count":  {func(a platform.Adapter) platform.Adapter { return short{a} }, true},
		"ignores ctx":  {func(a platform.Adapter) platform.Adapter { return deaf{a} }, false},
		"not hashable": {func(a platform.Adapter) platform.Adapter { return unhashable{a, map[string]bool{}} }, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, platformsim.Config{})
			keys := e.Submit("acct-1", worldtest.Texts("contract", 30)...)
			cfg := e.config()
			cfg.Platforms = platform.Registry{sim.Name: func(a platform.Account) (platform.Adapter, error) {
				ad, err := sim.Open(a)
				if err != nil {
					return nil, err
				}
				return c.wrap(ad), nil
			}}
			// Every send here is unknown, which keeps a cold account to one send at a time.
			stop := e.run(dispatch.WithoutTrials(cfg))
			intents := e.settle(keys, 30*time.Second)
			if c.published {
				require.Equal(t, map[ledger.State]int{ledger.Published: 30}, states(intents))
			}
			for _, in := range intents {
				require.Contains(t, []ledger.State{ledger.Published, ledger.Indeterminate}, in.State)
				if in.State == ledger.Indeterminate {
					require.Equal(t, ledger.ReasonReadbackMismatch, in.Reason, "a success not confirmed in time")
				}
			}
			stop() // Run returns: no read is left waiting on the deaf adapter
			for _, k := range keys {
				require.Equal(t, 1, e.sim.Created(k.String()))
			}
		})
	}
}
