package ledger

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

var lookupVerdicts = map[LookupResult]struct {
	state  State
	reason Reason
}{
	Found:         {Published, ReasonReconciledFound},
	ProvenNotSent: {Failed, ReasonReconciledNotSent},
	NotFound:      {Parked, ReasonReconcileNotFound},
	Unavailable:   {Parked, ReasonReconcileUnavailable},
}

// Reconciliation is a claimed lookup: the attempt whose outcome is unknown, and the token of
// the claim that holds its one lookup.
type Reconciliation struct {
	Key        identity.DeliveryKey
	Token      identity.AttemptToken
	Epoch      int64
	Generation int64
	// Claim is the token the claimer minted; only its holder records the lookup's result.
	Claim ClaimToken
	// Reclaimed: the claim had committed on an earlier call whose answer was lost, and this
	// call, with the same token, learnt that it is the caller's own.
	Reclaimed bool
}

// ClaimToken names one claim of a lookup. The claimer mints it before it asks, so that after an
// answer it did not hear (a connection lost during COMMIT) it can ask again with the same token
// and learn whether the claim that committed is its own, instead of taking its own claim for
// another reconciler's and leaving the intent to a person.
type ClaimToken [16]byte

// NewClaimToken returns a random ClaimToken.
func NewClaimToken() (ClaimToken, error) {
	var t ClaimToken
	if _, err := rand.Read(t[:]); err != nil {
		return t, fmt.Errorf("claim token: %w", err)
	}
	return t, nil
}

// ClaimReconciliation claims, with the caller's token, the one lookup allowed for the attempt
// that left an intent indeterminate, durably, before the lookup is made. A second claim, by
// any reconciler or after a crash, is refused with ErrAlreadyClaimed: a claimed lookup that
// never resolved is for a human (the sweeper parks it), never for a second lookup. The one
// exception is the caller's own claim: a call with the token of a claim that committed, made
// because the answer to the first was lost, returns the claim (Reclaimed). A token is for one
// claim, and is asked again only after an error, never after a claim was returned: the
// lookup follows a returned claim, once. Refused with ErrInvalidTransition unless the intent
// is indeterminate.
func (l *Ledger) ClaimReconciliation(ctx context.Context, key identity.DeliveryKey, token ClaimToken) (Reconciliation, error) {
	var row dbsqlc.ReconciliationClaimRow
	err := l.inTx(ctx, string(OpReconcile), func(q *dbsqlc.Queries) (err error) {
		row, err = q.ReconciliationClaim(ctx, dbsqlc.ReconciliationClaimParams{DeliveryKey: key.Bytes(), Actor: l.cfg.Actor, ClaimToken: token[:]})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Reconciliation{}, refused(OpReconcile, ErrNotFound, "")
	}
	if err != nil {
		return Reconciliation{}, fmt.Errorf("claim reconciliation of %s: %w", key, err)
	}
	state := State(row.State)
	if state != Indeterminate {
		return Reconciliation{}, refused(OpReconcile, ErrInvalidTransition, state)
	}
	if !row.Claimed && !row.Reclaimed {
		return Reconciliation{}, refused(OpReconcile, ErrAlreadyClaimed, state)
	}
	attempt, err := identity.AttemptTokenFromBytes(row.AttemptToken)
	if err != nil {
		return Reconciliation{}, fmt.Errorf("claim reconciliation of %s: %w", key, err)
	}
	return Reconciliation{Key: key, Token: attempt, Epoch: row.Epoch.Int64, Generation: row.Generation.Int64, Claim: token, Reclaimed: row.Reclaimed}, nil
}

// ResolveReconciliation records the result of the claimed lookup and moves the intent on:
// Found -> published, ProvenNotSent -> failed, NotFound and Unavailable -> parked. Only the
// holder of r's claim token may. Asked again after an error, when the first write had
// committed, it returns the state that write left, as the first answer would have. It is
// refused with ErrInvalidTransition when the lookup was not claimed with r's token, was
// already resolved by another, or the intent has moved on.
func (l *Ledger) ResolveReconciliation(ctx context.Context, r Reconciliation, result LookupResult, objectID string, detail map[string]any) (State, error) {
	verdict, ok := lookupVerdicts[result]
	if !ok {
		return "", fmt.Errorf("resolve reconciliation of %s: unknown lookup result %q", r.Key, result)
	}
	if result == Found && objectID == "" {
		return "", fmt.Errorf("resolve reconciliation of %s: found without an object id", r.Key)
	}
	raw, err := detailJSON(detail)
	if err != nil {
		return "", fmt.Errorf("resolve reconciliation of %s: detail: %w", r.Key, err)
	}
	var row dbsqlc.ReconciliationResolveRow
	err = l.inTx(ctx, string(OpReconcile), func(q *dbsqlc.Queries) (err error) {
		row, err = q.ReconciliationResolve(ctx, dbsqlc.ReconciliationResolveParams{
			DeliveryKey:  r.Key.Bytes(),
			Result:       string(result),
			ObjectID:     pgtype.Text{String: objectID, Valid: objectID != ""},
			Actor:        l.cfg.Actor,
			Detail:       raw,
			AttemptToken: r.Token.Bytes(),
			ToState:      string(verdict.state),
			Reason:       string(verdict.reason),
			ClaimToken:   r.Claim[:],
		})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", refused(OpReconcile, ErrNotFound, "")
	}
	if err != nil {
		return "", fmt.Errorf("resolve reconciliation of %s: %w", r.Key, err)
	}
	if !row.NewState.Valid {
		if row.Repeated {
			return State(row.PriorState), nil
		}
		return "", refused(OpReconcile, ErrInvalidTransition, State(row.PriorState))
	}
	return State(row.NewState.String), nil
}

// ResolveFromEvidence publishes an indeterminate intent without a lookup, on the evidence of a
// fenced-out worker that reported success with objectID; the caller must have read the object
// back and confirmed its text first. Refused with ErrInvalidTransition when the intent is not
// indeterminate or no such evidence exists.
func (l *Ledger) ResolveFromEvidence(ctx context.Context, key identity.DeliveryKey, objectID string) error {
	var row dbsqlc.IntentResolveFromEvidenceRow
	err := l.inTx(ctx, string(OpReconcile), func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentResolveFromEvidence(ctx, dbsqlc.IntentResolveFromEvidenceParams{DeliveryKey: key.Bytes(), ObjectID: objectID, Actor: l.cfg.Actor})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return refused(OpReconcile, ErrNotFound, "")
	}
	if err != nil {
		return fmt.Errorf("resolve %s from evidence: %w", key, err)
	}
	if !row.NewState.Valid {
		return refused(OpReconcile, ErrInvalidTransition, State(row.PriorState))
	}
	return nil
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
