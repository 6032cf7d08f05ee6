package ledger_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// subject is one intent brought into a phase, with the claim of its latest attempt when it has
// one.
type subject struct {
	env   identity.Envelope
	key   identity.DeliveryKey
	claim ledger.Claim
}

// enter brings a fresh intent with text into phase.
func (e *env) enter(phase ledger.Phase, text string) subject {
	e.t.Helper()
	s := subject{env: envelope(e.t, account, text)}
	s.key = s.env.DeliveryKey()
	complete := func(o ledger.Outcome) {
		s.claim = e.authorized(text)
		_, err := e.l.Complete(e.ctx, s.claim, o)
		require.NoError(e.t, err)
	}
	switch phase {
	case ledger.PhaseNone:
	case ledger.PhasePendingFree:
		e.submit(text)
	case ledger.PhasePendingClaimed:
		s.claim = e.claim(text)
	case ledger.PhasePendingStale:
		s.claim = e.claim(text)
		e.expireLease(s.key)
	case ledger.PhaseAuthorizedLive:
		s.claim = e.authorized(text)
	case ledger.PhaseAuthorizedExpired:
		s.claim = e.authorized(text)
		e.expireLease(s.key)
	case ledger.PhasePublished:
		complete(ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-" + text, Confirmed: true})
	case ledger.PhaseFailed:
		complete(ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	case ledger.PhaseIndeterminate:
		complete(ledger.Outcome{Result: ledger.Unknown})
	case ledger.PhaseParked:
		e.submit(text)
		require.NoError(e.t, e.l.Park(e.ctx, s.key, ledger.Actor{Name: "operator", Reason: "walk"}))
	default:
		e.t.Fatalf("no way into phase %s", phase)
	}
	return s
}

// apply runs op on s and returns whether the ledger accepted it (changed the intent).
func (e *env) apply(op ledger.Operation, s subject) (accepted bool, err error) {
	switch op {
	case ledger.OpSubmit:
		res, err := e.l.Submit(e.ctx, []identity.Envelope{s.env})
		return err == nil && res[0].Outcome == ledger.Created, err
	case ledger.OpBegin:
		_, err = e.l.Begin(e.ctx, s.key, requestHash("walk"), lease)
		if errors.Is(err, ledger.ErrAttemptsExhausted) {
			return true, nil // parked: a change
		}
	case ledger.OpAuthorize:
		_, err = e.l.Authorize(e.ctx, s.claim, inFlight, contract)
	case ledger.OpComplete:
		var c ledger.Completion
		// Neutral: the walk is about the transition table, and a counted failure would make the
		// account suspect, one attempt in flight at a time, for the phases entered after it.
		c, err = e.l.Complete(e.ctx, s.claim, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed, Signal: ledger.SignalNeutral})
		if err == nil && c.Repeated {
			return false, nil // the phase's own completion, answered as it landed: no change
		}
	case ledger.OpRetry:
		err = e.l.Retry(e.ctx, s.key)
	case ledger.OpExpire:
		n, err := e.l.ExpireLeases(e.ctx, 10)
		return err == nil && len(n.Changed) > 0, err
	case ledger.OpReconcile:
		var r ledger.Reconciliation
		if r, err = e.l.ClaimReconciliation(e.ctx, s.key, newClaimToken()); err == nil {
			_, err = e.l.ResolveReconciliation(e.ctx, r, ledger.NotFound, "", nil)
		}
	case ledger.OpPark:
		err = e.l.Park(e.ctx, s.key, ledger.Actor{Name: "operator", Reason: "walk"})
	case ledger.OpResolve:
		err = e.l.Resolve(e.ctx, s.key, ledger.Failed, "", ledger.Actor{Name: "operator", Reason: "checked the platform by hand"})
	case ledger.OpCancel:
		var c ledger.Cancellation
		if c, err = e.l.Cancel(e.ctx, account, s.key, ledger.Actor{Name: "producer", Reason: "walk"}); err == nil {
			return c.Changed, nil
		}
	default:
		return false, fmt.Errorf("no way to apply %s", op)
	}
	var r *ledger.RefusedError
	if errors.As(err, &r) {
		return false, nil
	}
	return err == nil, err
}

// TestEveryPhaseAndOperationFollowsTheTransitionTable walks every (phase, operation) pair on
// the real database: an operation the table allows ends in one of the states it names; one it
// does not is refused and changes nothing, not even the history.
func TestEveryPhaseAndOperationFollowsTheTransitionTable(t *testing.T) {
	t.Parallel()
	for _, phase := range ledger.Phases() {
		t.Run(string(phase), func(t *testing.T) {
			t.Parallel()
			shared := newEnv(t)
			for i, op := range ledger.Operations() {
				e := shared
				if op == ledger.OpExpire {
					e = newEnv(t) // ExpireLeases sweeps the whole ledger: give it one intent
				}
				s := e.enter(phase, fmt.Sprintf("%s %s %d", phase, op, i))
				before, beforeErr := e.l.Get(e.ctx, s.key)
				accepted, err := e.apply(op, s)
				require.NoError(t, err, "%s on %s", op, phase)
				after, afterErr := e.l.Get(e.ctx, s.key)

				allowed, ok := ledger.Allowed(phase, op)
				if !ok {
					require.False(t, accepted, "%s on %s must be refused", op, phase)
					if beforeErr == nil {
						require.NoError(t, afterErr)
						require.Equal(t, before.State, after.State, "%s on %s changed the state", op, phase)
						require.Equal(t, before.Seq, after.Seq, "%s on %s wrote history", op, phase)
					} else {
						require.ErrorIs(t, afterErr, ledger.ErrNotFound)
					}
					continue
				}
				require.True(t, accepted, "%s on %s must be accepted", op, phase)
				require.NoError(t, afterErr)
				require.True(t, slices.Contains(allowed, after.State), "%s on %s led to %s, the table allows %v", op, phase, after.State, allowed)
				if beforeErr == nil {
					require.Greater(t, after.Seq, before.Seq, "%s on %s wrote no history", op, phase)
				}
			}
		})
	}
}

// Nothing in the table leads from authorized or indeterminate back to pending, and nothing
// leaves published: the table itself is checked, so an edit to it cannot slip by.
func TestTransitionTableHasNoWayBack(t *testing.T) {
	for _, phase := range []ledger.Phase{ledger.PhaseAuthorizedLive, ledger.PhaseAuthorizedExpired, ledger.PhaseIndeterminate} {
		for op, to := range ledger.Transitions()[phase] {
			require.NotContains(t, to, ledger.Pending, "%s on %s", op, phase)
		}
	}
	require.Empty(t, ledger.Transitions()[ledger.PhasePublished])
	for phase, ops := range ledger.Transitions() {
		for op, to := range ops {
			if slices.Contains(to, ledger.Pending) && phase == ledger.PhaseFailed {
				require.Equal(t, ledger.OpRetry, op, "only Retry leaves failed for pending")
			}
		}
	}
	_, parkLive := ledger.Allowed(ledger.PhaseAuthorizedLive, ledger.OpPark)
	require.False(t, parkLive, "an authorized intent with a live lease is never parked")
}
