package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// RetryAs is Retry on an operator's word: by names the operator and its Reason says why; both are
// written to the history row of the transition (into pending, or into parked when the attempt
// cap is reached), not the Ledger's configured Actor. It is refused exactly as Retry is.
func (l *Ledger) RetryAs(ctx context.Context, key identity.DeliveryKey, by Actor) error {
	actor, note := by.Name, by.Reason
	if strings.TrimSpace(actor) == "" {
		return errors.New("retry: an operator must be named")
	}
	if err := checkChange(actor, "note", note); err != nil {
		return fmt.Errorf("retry %s: %w", key, err)
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
		rows, err := q.IntentsRetryMany(ctx, dbsqlc.IntentsRetryManyParams{DeliveryKeys: keys, Seqs: seqs, Always: alwaysRetried(), Actor: l.cfg.Actor})
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
