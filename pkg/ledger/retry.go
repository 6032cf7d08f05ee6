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

// Retry reopens a failed intent: it moves back to pending with a dispatch work item, and no
// attempt row is written (the next Begin writes exactly one, with a new token). It is refused
// with ErrInvalidTransition from every state but failed: only failed proves nothing was sent.
// When the attempt cap is reached it parks the intent and returns ErrAttemptsExhausted.
func (l *Ledger) Retry(ctx context.Context, key identity.DeliveryKey) error {
	return l.retry(ctx, key, l.cfg.Actor, nil)
}

// RetryAs is Retry on an operator's word: actor names the operator and note says why; both are
// written to the history row of the transition (into pending, or into parked when the attempt
// cap is reached), not the Ledger's configured Actor. It is refused exactly as Retry is.
func (l *Ledger) RetryAs(ctx context.Context, key identity.DeliveryKey, actor, note string) error {
	if strings.TrimSpace(actor) == "" {
		return errors.New("retry: an operator must be named")
	}
	detail, err := json.Marshal(map[string]string{"note": note})
	if err != nil {
		return err
	}
	return l.retry(ctx, key, actor, detail)
}

func (l *Ledger) retry(ctx context.Context, key identity.DeliveryKey, actor string, detail []byte) error {
	var row dbsqlc.IntentRetryRow
	err := l.inTx(ctx, string(OpRetry), func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentRetry(ctx, dbsqlc.IntentRetryParams{DeliveryKey: key.Bytes(), Actor: actor, Detail: detail})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return refused(OpRetry, ErrNotFound, "")
	}
	if err != nil {
		return fmt.Errorf("retry %s: %w", key, err)
	}
	prior := State(row.PriorState)
	switch {
	case row.Outcome == "exhausted" && row.NewState.String == string(Parked):
		return refused(OpRetry, ErrAttemptsExhausted, prior)
	case row.Outcome == "retry" && row.NewState.String == string(Pending):
		return nil
	}
	return refused(OpRetry, ErrInvalidTransition, prior)
}
