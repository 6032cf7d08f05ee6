package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// Authorization is the verdict of Authorize on a claim that still held its fence.
type Authorization struct {
	// State is Authorized when the send may go ahead, otherwise Failed (a transient gate
	// refused: nothing was sent, retryable by policy) or Parked (a terminal gate refused).
	State State
	// Reason is ReasonAuthorized or the gate that refused.
	Reason Reason
	// LeaseExpiresAt is the in-flight lease deadline on the database's clock, when
	// authorized. The send must end before it.
	LeaseExpiresAt time.Time
}

// Authorized reports whether the send may go ahead.
func (a Authorization) Authorized() bool { return a.State == Authorized }

// failedReasons are the refusals at authorization that end an attempt in failed; every other
// refusal parks. Derived from Reasons, so the SQL never holds a second copy of the mapping.
var failedReasons = func() []string {
	var out []string
	for r, rule := range Reasons {
		if rule.State == Failed {
			out = append(out, string(r))
		}
	}
	return out
}()

// Authorize is the before-byte checkpoint, to be called immediately before the first byte.
// It checks the claim's fence (ErrInvalidTransition, ErrLeaseLost, ErrFenced or
// ErrRequestMismatch, changing nothing) and then re-checks every gate; a refusal is not an
// error but an Authorization in Failed or Parked, which ends the attempt. contractVersion is
// the platform contract the adapter speaks; an account that pins another is refused.
func (l *Ledger) Authorize(ctx context.Context, c Claim, inFlight time.Duration, contractVersion string) (Authorization, error) {
	if inFlight <= 0 {
		return Authorization{}, fmt.Errorf("authorize: in-flight lease must be positive, got %s", inFlight)
	}
	var row dbsqlc.IntentAuthorizeRow
	err := l.inTx(ctx, OpAuthorize, func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentAuthorize(ctx, dbsqlc.IntentAuthorizeParams{
			DeliveryKey:     c.Key.Bytes(),
			AttemptToken:    c.Token.Bytes(),
			Epoch:           c.Epoch,
			Generation:      c.Generation,
			RequestHash:     c.RequestHash[:],
			ContractVersion: contractVersion,
			FailedReasons:   failedReasons,
			InFlightMs:      inFlight.Milliseconds(),
			Now:             l.clock(),
			Actor:           l.cfg.Actor,
		})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Authorization{}, refused(OpAuthorize, ErrNotFound, "")
	}
	if err != nil {
		return Authorization{}, fmt.Errorf("authorize %s: %w", c.Key, err)
	}
	prior := State(row.PriorState)
	switch row.Outcome {
	case "invalid_transition":
		return Authorization{}, refused(OpAuthorize, ErrInvalidTransition, prior)
	case "lease_lost":
		return Authorization{}, refused(OpAuthorize, ErrLeaseLost, prior)
	case "fenced":
		return Authorization{}, refused(OpAuthorize, ErrFenced, prior)
	case "request_mismatch":
		return Authorization{}, refused(OpAuthorize, ErrRequestMismatch, prior)
	}
	if !row.NewState.Valid {
		return Authorization{}, refused(OpAuthorize, ErrLeaseLost, prior)
	}
	a := Authorization{State: State(row.NewState.String), Reason: Reason(row.Outcome)}
	if rule, ok := a.Reason.Rule(); !ok || rule.State != a.State {
		return Authorization{}, fmt.Errorf("authorize %s: reason %q led to %s, which the reason table does not say", c.Key, a.Reason, a.State)
	}
	if a.Authorized() {
		if row.LeaseExpiresAt == nil {
			return Authorization{}, fmt.Errorf("authorize %s: authorized without a lease", c.Key)
		}
		a.LeaseExpiresAt = *row.LeaseExpiresAt
	}
	return a, nil
}
