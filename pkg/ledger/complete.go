package ledger

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// TransportResult is what the transport says happened to a send, in the platform adapter's
// vocabulary.
type TransportResult string

const (
	// Sent: the platform answered success with an object id.
	Sent TransportResult = "success"
	// NotSent: the transport PROVED nothing left (refused before any byte, or a definitive
	// refusal by the platform).
	NotSent TransportResult = "not_sent"
	// Unknown: anything else: bytes may have left and no answer proves what happened.
	Unknown TransportResult = "unknown"
)

// Outcome is a worker's report of one authorized attempt.
type Outcome struct {
	Result TransportResult
	// ObjectID is the platform's id of the created object (Sent).
	ObjectID string
	// Confirmed: the object was read back by id and its canonical text matched (Sent).
	Confirmed bool
	// Reason says why, for NotSent (ReasonConnectionFailed or ReasonPlatformRejected) and
	// optionally for Unknown (default ReasonSendUnknown).
	Reason Reason
	// Detail is kept with the evidence and the history row: status codes, error text. Never
	// a credential or a full request body.
	Detail map[string]any
}

// verdict maps an outcome to the state and reason it leads to. Only a confirmed success
// publishes; only a proven not-sent fails; everything else is indeterminate.
func (o Outcome) verdict() (State, Reason, error) {
	switch o.Result {
	case Sent:
		switch {
		case o.ObjectID == "":
			return Indeterminate, ReasonSendUnknown, nil
		case !o.Confirmed:
			return Indeterminate, ReasonReadbackMismatch, nil
		default:
			return Published, ReasonPublished, nil
		}
	case NotSent:
		if o.Reason != ReasonConnectionFailed && o.Reason != ReasonPlatformRejected {
			return "", "", fmt.Errorf("a not-sent outcome needs reason %s or %s, got %q", ReasonConnectionFailed, ReasonPlatformRejected, o.Reason)
		}
		return Failed, o.Reason, nil
	case Unknown:
		switch o.Reason {
		case "":
			return Indeterminate, ReasonSendUnknown, nil
		case ReasonSendUnknown, ReasonReadbackMismatch:
			return Indeterminate, o.Reason, nil
		}
		return "", "", fmt.Errorf("an unknown outcome cannot have reason %q", o.Reason)
	}
	return "", "", fmt.Errorf("unknown transport result %q", o.Result)
}

// Completion is what Complete did.
type Completion struct {
	State  State
	Reason Reason
}

// Complete records the outcome of an authorized attempt: a confirmed success publishes, a
// proven not-sent fails (and releases the duplicate-text claim), anything else is
// indeterminate. When the claim's fence is no longer current (a newer attempt, an epoch bump,
// or the sweeper already moved the intent on) it changes no state and returns ErrFenced; the
// outcome is kept as evidence either way.
func (l *Ledger) Complete(ctx context.Context, c Claim, o Outcome) (Completion, error) {
	to, reason, err := o.verdict()
	if err != nil {
		return Completion{}, fmt.Errorf("complete %s: %w", c.Key, err)
	}
	detail := []byte("{}")
	if len(o.Detail) > 0 {
		if detail, err = json.Marshal(o.Detail); err != nil {
			return Completion{}, fmt.Errorf("complete %s: detail: %w", c.Key, err)
		}
	}
	var row dbsqlc.IntentCompleteRow
	err = l.inTx(ctx, OpComplete, func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentComplete(ctx, dbsqlc.IntentCompleteParams{
			DeliveryKey:  c.Key.Bytes(),
			ToState:      string(to),
			Reason:       string(reason),
			ObjectID:     pgtype.Text{String: o.ObjectID, Valid: o.ObjectID != ""},
			AttemptToken: c.Token.Bytes(),
			Epoch:        c.Epoch,
			Generation:   c.Generation,
			Outcome:      string(o.Result),
			Detail:       detail,
			Actor:        l.cfg.Actor,
		})
		return err
	})
	if err != nil {
		return Completion{}, fmt.Errorf("complete %s: %w", c.Key, err)
	}
	switch {
	case !row.PriorState.Valid:
		return Completion{}, refused(OpComplete, ErrNotFound, "")
	case !row.NewState.Valid:
		return Completion{}, refused(OpComplete, ErrFenced, State(row.PriorState.String))
	}
	return Completion{State: State(row.NewState.String), Reason: reason}, nil
}
