package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// Park stops an intent on an operator's word: it becomes parked, owned by a human. by names
// the operator and its Reason says why (the note); both are written to history. Refused with ErrLeaseLive for an
// authorized intent whose worker's lease is live, and with ErrInvalidTransition for published
// and parked intents.
func (l *Ledger) Park(ctx context.Context, key identity.DeliveryKey, by Actor) error {
	return l.ParkFrom(ctx, key, []State{Pending, Authorized, Failed, Indeterminate}, by)
}

// ParkFrom is Park held to the states in from: an intent in another state is refused
// (ErrInvalidTransition) by the statement that parks it, so a caller that looked at an intent
// first (a bulk park of the pending ones it previewed) never parks one that moved on since.
func (l *Ledger) ParkFrom(ctx context.Context, key identity.DeliveryKey, from []State, by Actor) error {
	actor, note := by.Name, by.Reason
	if strings.TrimSpace(actor) == "" {
		return errors.New("park: an operator must be named")
	}
	if err := checkChange(actor, "note", note); err != nil {
		return fmt.Errorf("park %s: %w", key, err)
	}
	detail, err := json.Marshal(map[string]string{"note": note})
	if err != nil {
		return err
	}
	states := make([]string, len(from))
	for i, st := range from {
		states[i] = string(st)
	}
	var row dbsqlc.IntentParkRow
	err = l.inTx(ctx, string(OpPark), func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentPark(ctx, dbsqlc.IntentParkParams{DeliveryKey: key.Bytes(), FromStates: states, Actor: actor, Detail: detail})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return refused(OpPark, ErrNotFound, "")
	}
	if err != nil {
		return fmt.Errorf("park %s: %w", key, err)
	}
	prior := State(row.PriorState)
	switch {
	case row.Outcome == "lease_live":
		return refused(OpPark, ErrLeaseLive, prior)
	case row.Outcome != "park" || row.ChangedKey == nil:
		return refused(OpPark, ErrInvalidTransition, prior)
	}
	return nil
}

// Resolve is a human's verdict on a parked intent: Published (objectID names the object found
// on the platform) or Failed (it was not sent; its text is released). by names the operator,
// and its Reason is the evidence: how the operator knows; both are required.
func (l *Ledger) Resolve(ctx context.Context, key identity.DeliveryKey, to State, objectID string, by Actor) error {
	actor, evidence := by.Name, by.Reason
	var reason Reason
	switch to {
	case Published:
		reason = ReasonOperatorPublished
	case Failed:
		reason = ReasonOperatorFailed
	default:
		return fmt.Errorf("resolve %s: a parked intent resolves to published or failed, not %q", key, to)
	}
	if strings.TrimSpace(actor) == "" || strings.TrimSpace(evidence) == "" {
		return fmt.Errorf("resolve %s: an operator and evidence are required", key)
	}
	if err := checkChange(actor, "evidence", evidence); err != nil {
		return fmt.Errorf("resolve %s: %w", key, err)
	}
	detail, err := json.Marshal(map[string]string{"evidence": evidence})
	if err != nil {
		return err
	}
	var row dbsqlc.IntentResolveRow
	err = l.inTx(ctx, string(OpResolve), func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentResolve(ctx, dbsqlc.IntentResolveParams{
			DeliveryKey: key.Bytes(),
			ToState:     string(to),
			Reason:      string(reason),
			ObjectID:    pgtype.Text{String: objectID, Valid: objectID != ""},
			Actor:       actor,
			Detail:      detail,
		})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return refused(OpResolve, ErrNotFound, "")
	}
	if err != nil {
		return fmt.Errorf("resolve %s: %w", key, err)
	}
	if !row.NewState.Valid {
		if to == Failed && objectID != "" && State(row.PriorState) == Parked {
			return refused(OpResolve, ErrObjectNotSent, Parked)
		}
		return refused(OpResolve, ErrInvalidTransition, State(row.PriorState))
	}
	return nil
}

// BumpEpoch starts the next restore epoch and returns it; the change is appended to the
// control history with actor and reason in the same statement. Run it after restoring the
// ledger and before any worker reconnects: every claim and completion of an older epoch is
// refused from then on (docs/design.md#the-restore-protocol). Of two bumps at once one
// fails; neither skips an epoch.
func (l *Ledger) BumpEpoch(ctx context.Context, by Actor) (int64, error) {
	actor, reason := by.Name, by.Reason
	if strings.TrimSpace(actor) == "" {
		return 0, errors.New("bump epoch: an operator must be named")
	}
	if err := checkChange(actor, "reason", reason); err != nil {
		return 0, fmt.Errorf("bump epoch: %w", err)
	}
	var epoch int64
	err := l.inTx(ctx, "epoch bump", func(q *dbsqlc.Queries) (err error) {
		epoch, err = q.EpochBump(ctx, dbsqlc.EpochBumpParams{Reason: reason, Actor: actor})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("bump epoch: %w", err)
	}
	return epoch, nil
}

// Epoch returns the current restore epoch.
func (l *Ledger) Epoch(ctx context.Context) (int64, error) {
	var epoch int64
	err := l.inTx(ctx, "epoch", func(q *dbsqlc.Queries) (err error) {
		epoch, err = q.EpochCurrent(ctx)
		return err
	})
	return epoch, err
}

// EpochStart says when a restore epoch began, who began it and why.
type EpochStart struct {
	Epoch  int64     `json:"epoch"`
	Reason string    `json:"reason"`
	Actor  string    `json:"actor"`
	At     time.Time `json:"at"`
}

// CurrentEpoch returns the start of the current restore epoch.
func (l *Ledger) CurrentEpoch(ctx context.Context) (EpochStart, error) {
	var row dbsqlc.Epoch
	err := l.inTx(ctx, "epoch", func(q *dbsqlc.Queries) (err error) {
		row, err = q.EpochLatest(ctx)
		return err
	})
	if err != nil {
		return EpochStart{}, fmt.Errorf("current epoch: %w", err)
	}
	return EpochStart{row.Epoch, row.Reason, row.Actor, row.CreatedAt}, nil
}
