package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// This file holds recovery: the pending intents nobody holds whose work item may be lost, and
// the indeterminate intents no reconciler will finish, parked for a person. Candidates are
// found by a read-only scan (scan), then changed by primary key in a statement that restates
// every guard, so a candidate that moved on in between is left alone and any number of
// sweepers may run at once. Retries by policy are in retry.go, the reconciler's reads in
// reconcile.go.

// Stranded is a pending intent that nobody holds and nothing has moved for a while: its work
// item may have been lost.
type Stranded struct {
	Key     identity.DeliveryKey
	Account string
	// Seq is the intent's latest transition (into pending): the work item names its event.
	Seq int64
	// TraceParent is the intent's stored traceparent, for the work item's header ("" for none).
	TraceParent string
}

// StrandedPending returns up to max pending intents without a claim whose last transition is
// older than idle, oldest first.
func (l *Ledger) StrandedPending(ctx context.Context, idle time.Duration, max int) ([]Stranded, error) {
	if max <= 0 || idle <= 0 {
		return nil, fmt.Errorf("stranded pending: idle %s and max %d must be positive", idle, max)
	}
	var rows []dbsqlc.SweepStrandedPendingRow
	err := l.scan(ctx, "stranded pending", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.SweepStrandedPending(ctx, dbsqlc.SweepStrandedPendingParams{Reasons: reasonsOf(Pending), IdleMs: idle.Milliseconds(), MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Stranded, 0, len(rows))
	for _, r := range rows {
		key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("stranded pending: %w", err)
		}
		out = append(out, Stranded{Key: key, Account: r.AccountID, Seq: r.TransitionSeq, TraceParent: r.Traceparent.String})
	}
	return out, nil
}

// Waking is a pending intent whose work item the dispatcher acknowledged while its account held,
// now that the account may go on (HeldToWake).
type Waking struct {
	Stranded
	// Wake is the account's health version that lets it go: the round of its work item's
	// message id, one copy per intent and heal (or probe).
	Wake int64
}

// HeldToWake returns up to max pending intents without a claim, oldest first, whose accounts
// may go on again: every one that waited through the hold of an account that serves again since
// less than recent, and the oldest of each account whose probe is due. Their work items were
// acknowledged while the account held, so that a held account's backlog does not fill the
// dispatcher's queue (docs/design.md#held-work-leaves-the-queue); the sweeper publishes them
// again. Past recent, the stranded pass (StrandedPending) still finds them.
func (l *Ledger) HeldToWake(ctx context.Context, recent time.Duration, max int) ([]Waking, error) {
	if max <= 0 || recent <= 0 {
		return nil, fmt.Errorf("held to wake: recent %s and max %d must be positive", recent, max)
	}
	var rows []dbsqlc.SweepHeldToWakeRow
	err := l.scan(ctx, "held to wake", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.SweepHeldToWake(ctx, dbsqlc.SweepHeldToWakeParams{Reasons: reasonsOf(Pending), RecentMs: recent.Milliseconds(), MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Waking, 0, len(rows))
	for _, r := range rows {
		key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("held to wake: %w", err)
		}
		out = append(out, Waking{Stranded: Stranded{Key: key, Account: r.AccountID, Seq: r.TransitionSeq, TraceParent: r.Traceparent.String}, Wake: r.Wake})
	}
	return out, nil
}

// Unreconciled counts what one ParkUnreconciled did.
type Unreconciled struct {
	// LookupLost intents had their one lookup claimed and never resolved: the claim is closed
	// 'unavailable' and the intent parked. A second lookup is never made.
	LookupLost int
	// NeverReconciled intents waited longer than the deadline with no lookup claimed.
	NeverReconciled int
	// Changed lists the intents that moved, for the caller to publish.
	Changed []identity.DeliveryKey
}

// ParkUnreconciled parks (reconcile_unavailable) up to max indeterminate intents that no
// reconciler will finish: the lookup was claimed more than stale ago and never resolved, or no
// lookup was claimed within unclaimed. Nothing is looked up and nothing is sent: a human takes
// over.
func (l *Ledger) ParkUnreconciled(ctx context.Context, stale, unclaimed time.Duration, max int) (Unreconciled, error) {
	if max <= 0 || stale <= 0 || unclaimed <= 0 {
		return Unreconciled{}, fmt.Errorf("park unreconciled: stale %s, unclaimed %s and max %d must be positive", stale, unclaimed, max)
	}
	var keys [][]byte
	err := l.scan(ctx, "unreconciled", func(q *dbsqlc.Queries) (err error) {
		keys, err = q.SweepUnreconciled(ctx, dbsqlc.SweepUnreconciledParams{Reasons: reasonsOf(Indeterminate), StaleMs: stale.Milliseconds(), UnclaimedMs: unclaimed.Milliseconds(), MaxRows: int32(max)})
		return err
	})
	if err != nil || len(keys) == 0 {
		return Unreconciled{}, err
	}
	var rows []dbsqlc.IntentsParkUnreconciledRow
	err = l.inTx(ctx, string(OpPark), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsParkUnreconciled(ctx, dbsqlc.IntentsParkUnreconciledParams{DeliveryKeys: keys, StaleMs: stale.Milliseconds(), UnclaimedMs: unclaimed.Milliseconds(), Actor: l.cfg.Actor})
		return err
	})
	if err != nil {
		return Unreconciled{}, fmt.Errorf("park unreconciled: %w", err)
	}
	var n Unreconciled
	for _, r := range rows {
		if !r.NewState.Valid {
			continue
		}
		key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
		if err != nil {
			return n, err
		}
		n.Changed = append(n.Changed, key)
		switch r.Outcome {
		case "lookup_lost":
			n.LookupLost++
		case "never_reconciled":
			n.NeverReconciled++
		}
	}
	return n, nil
}
