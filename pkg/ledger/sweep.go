package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// The recovery half of the state machine: what the sweeper and the reconciler ask of the
// ledger. Candidates are found by a read-only scan (scan), then changed by primary key in a
// statement that restates every guard, so a candidate that moved on in between is left alone
// and any number of sweepers may run at once.

// scan runs fn in a read-only READ COMMITTED transaction: the search for candidates. It takes
// no predicate locks, so under SERIALIZABLE a sweep over intents_sweep_idx never aborts the
// dispatchers' transitions; correctness rests on the guarded change that follows, never on
// what the scan saw.
func (l *Ledger) scan(ctx context.Context, what string, fn func(q *dbsqlc.Queries) error) error {
	tx, err := l.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("%s: begin transaction: %w", what, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(dbsqlc.New(tx)); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return tx.Commit(ctx)
}

// Stranded is a pending intent that nobody holds and nothing has moved for a while: its work
// item may have been lost.
type Stranded struct {
	Key     identity.DeliveryKey
	Account string
	// Seq is the intent's latest transition (into pending): the work item names its event.
	Seq int64
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
		out = append(out, Stranded{Key: key, Account: r.AccountID, Seq: r.TransitionSeq})
	}
	return out, nil
}

// RetryPass counts what one RetryDue did.
type RetryPass struct {
	// Retried failed intents went back to pending, each with a work item.
	Retried int
	// Exhausted failed intents had reached their attempt cap and were parked.
	Exhausted int
	// Held is how many due retries waited for their account's retry bucket.
	Held int
	// Changed lists the intents that moved, for the caller to publish.
	Changed []identity.DeliveryKey
}

// RetryDue retries failed intents as their accounts' policies say, read from the database on
// every call: the reason is retryable (always, or listed by the policy), the backoff since the
// failure has passed, and the account's retry bucket holds a token (refilled at the policy's
// rate, at most its burst; rate 0 is unlimited). An intent at its attempt cap is parked
// attempts_exhausted instead, without a token. A failed intent whose reason is not retryable is
// never touched. At most max intents are looked at per call.
func (l *Ledger) RetryDue(ctx context.Context, max int) (RetryPass, error) {
	if max <= 0 {
		return RetryPass{}, fmt.Errorf("retry due: max must be positive, got %d", max)
	}
	var rows []dbsqlc.SweepRetryCandidatesRow
	err := l.scan(ctx, "retry candidates", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.SweepRetryCandidates(ctx, dbsqlc.SweepRetryCandidatesParams{Always: alwaysRetried(), MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return RetryPass{}, err
	}
	byAccount := map[string][]dbsqlc.SweepRetryCandidatesRow{}
	var accounts []string
	for _, r := range rows {
		if _, ok := byAccount[r.AccountID]; !ok {
			accounts = append(accounts, r.AccountID)
		}
		byAccount[r.AccountID] = append(byAccount[r.AccountID], r)
	}
	var pass RetryPass
	for _, account := range accounts {
		n, err := l.retryAccount(ctx, account, byAccount[account])
		if err != nil {
			return pass, err
		}
		pass.Retried += n.Retried
		pass.Exhausted += n.Exhausted
		pass.Held += n.Held
		pass.Changed = append(pass.Changed, n.Changed...)
	}
	return pass, nil
}

// retryAccount retries one account's candidates in one transaction that holds the account's
// retry bucket locked from the refill to the spending: two sweepers never spend one token twice.
func (l *Ledger) retryAccount(ctx context.Context, account string, cands []dbsqlc.SweepRetryCandidatesRow) (RetryPass, error) {
	var pass RetryPass
	err := l.inTx(ctx, string(OpRetry), func(q *dbsqlc.Queries) error {
		pass = RetryPass{}
		budget := math.MaxInt
		if rate := cands[0].RatePerMinute; rate > 0 {
			tokens, err := q.RetryBucketRefill(ctx, dbsqlc.RetryBucketRefillParams{AccountID: account, RateBurst: float64(cands[0].RateBurst), RatePerMinute: float64(rate)})
			if err != nil {
				return err
			}
			budget = int(math.Floor(tokens))
		}
		var keys [][]byte
		var seqs []int64
		for _, c := range cands {
			if !c.Exhausted {
				if budget == 0 {
					pass.Held++
					continue
				}
				budget--
			}
			keys = append(keys, c.DeliveryKey)
			seqs = append(seqs, c.TransitionSeq)
		}
		if len(keys) == 0 {
			return nil
		}
		rows, err := q.IntentsRetryMany(ctx, dbsqlc.IntentsRetryManyParams{DeliveryKeys: keys, Seqs: seqs, Actor: l.cfg.Actor})
		if err != nil {
			return err
		}
		for _, r := range rows {
			if !r.NewState.Valid {
				continue
			}
			key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
			if err != nil {
				return err
			}
			pass.Changed = append(pass.Changed, key)
			switch State(r.NewState.String) {
			case Pending:
				pass.Retried++
			case Parked:
				pass.Exhausted++
			}
		}
		if cands[0].RatePerMinute > 0 && pass.Retried > 0 {
			return q.RetryBucketSpend(ctx, dbsqlc.RetryBucketSpendParams{AccountID: account, Spent: float64(pass.Retried)})
		}
		return nil
	})
	if err != nil {
		return RetryPass{}, fmt.Errorf("retry failed intents of %q: %w", account, err)
	}
	return pass, nil
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

// ReconcileCandidate is an indeterminate intent whose one lookup was never claimed, and since
// when (by the database's clock) it has been indeterminate. It is also the cursor of the next
// page of candidates.
type ReconcileCandidate struct {
	Key     identity.DeliveryKey
	Account string
	Since   time.Time
}

// ReconcileCandidates returns up to max indeterminate intents whose lookup was never claimed
// and that have been indeterminate for at least minAge by the database's clock, oldest first,
// after the cursor (the zero ReconcileCandidate for the first page): the reconciler's safety
// net for the indeterminate events it missed.
func (l *Ledger) ReconcileCandidates(ctx context.Context, minAge time.Duration, after ReconcileCandidate, max int) ([]ReconcileCandidate, error) {
	if max <= 0 {
		return nil, fmt.Errorf("reconcile candidates: max must be positive, got %d", max)
	}
	var rows []dbsqlc.ReconcileCandidatesRow
	err := l.scan(ctx, "reconcile candidates", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.ReconcileCandidates(ctx, dbsqlc.ReconcileCandidatesParams{Reasons: reasonsOf(Indeterminate), MinAgeMs: minAge.Milliseconds(),
			AfterAt: after.Since, AfterKey: after.Key.Bytes(), MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]ReconcileCandidate, 0, len(rows))
	for _, r := range rows {
		key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("reconcile candidates: %w", err)
		}
		out = append(out, ReconcileCandidate{Key: key, Account: r.AccountID, Since: r.UpdatedAt})
	}
	return out, nil
}

// ReconcileBacklog is how far reconciliation is behind: the indeterminate intents whose one
// lookup is not claimed yet (waiting out their reconcile delay, or for a reconciler), and how
// long the oldest of them has been indeterminate, by the database's clock.
type ReconcileBacklog struct {
	Waiting int64
	Oldest  time.Duration
}

// ReconcileBacklog reads the backlog of reconciliation, through intents_sweep_idx.
func (l *Ledger) ReconcileBacklog(ctx context.Context) (ReconcileBacklog, error) {
	var row dbsqlc.ReconcileWaitingRow
	err := l.scan(ctx, "reconcile backlog", func(q *dbsqlc.Queries) (err error) {
		row, err = q.ReconcileWaiting(ctx, reasonsOf(Indeterminate))
		return err
	})
	if err != nil {
		return ReconcileBacklog{}, err
	}
	return ReconcileBacklog{Waiting: row.Waiting, Oldest: time.Duration(row.OldestMs) * time.Millisecond}, nil
}

// ReconcileStatus is where an intent's reconciliation stands.
type ReconcileStatus struct {
	Intent Intent
	// Age is how long the intent has been in its state, by the database's clock.
	Age time.Duration
	// Claimed and Resolved say whether the lookup of its latest attempt was claimed, resolved.
	Claimed  bool
	Resolved bool
	// ReportedSuccess: a worker reported a success it had read back, with an object id
	// (Inspect's Evidence holds it), which may resolve the intent without a lookup.
	ReportedSuccess bool
}

// ReconcileStatusOf returns the intent and where its reconciliation stands, in one read, or
// ErrNotFound.
func (l *Ledger) ReconcileStatusOf(ctx context.Context, key identity.DeliveryKey) (ReconcileStatus, error) {
	var row dbsqlc.ReconcileStatusRow
	err := l.scan(ctx, "reconcile status of "+key.String(), func(q *dbsqlc.Queries) (err error) {
		row, err = q.ReconcileStatus(ctx, key.Bytes())
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return ReconcileStatus{}, ErrNotFound
	}
	if err != nil {
		return ReconcileStatus{}, err
	}
	in, err := intentFromRow(row.Intent)
	if err != nil {
		return ReconcileStatus{}, fmt.Errorf("reconcile status of %s: %w", key, err)
	}
	return ReconcileStatus{Intent: in, Age: time.Duration(row.AgeMs) * time.Millisecond, Claimed: row.Claimed, Resolved: row.Resolved,
		ReportedSuccess: row.ReportedSuccess}, nil
}

// Outstanding counts the intents not published, by state: those that may still move (pending,
// authorized, failed, indeterminate) and those that wait for a person (parked), each through an
// index that holds only them.
func (l *Ledger) Outstanding(ctx context.Context) (map[State]int64, error) {
	var r dbsqlc.IntentsOutstandingRow
	err := l.scan(ctx, "outstanding intents", func(q *dbsqlc.Queries) (err error) {
		r, err = q.IntentsOutstanding(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return map[State]int64{Pending: r.Pending, Authorized: r.Authorized, Failed: r.Failed, Indeterminate: r.Indeterminate, Parked: r.Parked}, nil
}
