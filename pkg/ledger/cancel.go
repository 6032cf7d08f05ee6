package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// Cancellation is the answer to Cancel: whether the intent is parked cancelled, and its state
// and reason after the request.
type Cancellation struct {
	// Cancelled is true when the intent is parked cancelled, by this request (Changed) or an
	// earlier one; false when it was too late.
	Cancelled bool
	// Changed is true when this request parked it.
	Changed bool
	// Prior is the state the request found.
	Prior  State
	State  State
	Reason Reason
	Seq    int64
}

// Cancel is the producer's cancel: the intent of account with key is parked cancelled if and
// only if it is not yet authorized (pending, claimed or not, or failed), decided by one guarded
// statement under the intent's row lock, so that of a cancel and an Authorize racing on it
// exactly one wins: a cancelled intent is never authorized, and an authorized one is never
// cancelled. Any other state is too late and nothing changes (Cancelled false, State says where
// it is). ErrNotFound when account holds no intent with key: another account's intent is not
// told apart from none. by names who asked (the producer's connection or token) and why; both
// are written to history.
func (l *Ledger) Cancel(ctx context.Context, account string, key identity.DeliveryKey, by Actor) (Cancellation, error) {
	if strings.TrimSpace(by.Name) == "" {
		return Cancellation{}, errors.New("cancel: who cancels must be named")
	}
	if err := checkChange(by.Name, "reason", by.Reason); err != nil {
		return Cancellation{}, fmt.Errorf("cancel %s: %w", key, err)
	}
	detail, err := json.Marshal(map[string]string{"note": by.Reason})
	if err != nil {
		return Cancellation{}, err
	}
	var row dbsqlc.IntentCancelRow
	err = l.inTx(ctx, string(OpCancel), func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentCancel(ctx, dbsqlc.IntentCancelParams{DeliveryKey: key.Bytes(), AccountID: account, Actor: by.Name, Detail: detail})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Cancellation{}, refused(OpCancel, ErrNotFound, "")
	}
	if err != nil {
		return Cancellation{}, fmt.Errorf("cancel %s: %w", key, err)
	}
	return Cancellation{Cancelled: row.Outcome == "cancelled", Changed: row.Changed, Prior: State(row.PriorState),
		State: State(row.State), Reason: Reason(row.Reason), Seq: row.Seq}, nil
}
