package ledger

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Errors a refused operation returns. Each means the operation changed nothing, except
// ErrFenced from Complete, whose outcome was kept as evidence, and ErrAttemptsExhausted from
// Begin and Retry, which parked the intent.
var (
	// ErrNotFound: no intent has that delivery key.
	ErrNotFound = errors.New("ledger: no such intent")
	// ErrInvalidTransition: the operation is not allowed from the intent's state.
	ErrInvalidTransition = errors.New("ledger: operation not allowed in this state")
	// ErrClaimed: another worker holds a live claim on the intent.
	ErrClaimed = errors.New("ledger: intent is claimed by a live attempt")
	// ErrLeaseLost: the caller's lease expired, or the intent was claimed again since.
	ErrLeaseLost = errors.New("ledger: lease lost")
	// ErrFenced: the caller's (epoch, generation) is no longer current.
	ErrFenced = errors.New("ledger: fenced out by a newer attempt or epoch")
	// ErrRequestMismatch: the request hash differs from the one the attempt was opened with.
	ErrRequestMismatch = errors.New("ledger: request hash does not match the attempt")
	// ErrAttemptsExhausted: the attempt cap is reached; the intent was parked.
	ErrAttemptsExhausted = errors.New("ledger: attempt cap reached, intent parked")
	// ErrLeaseLive: parking was refused because an authorized worker's lease is still live.
	ErrLeaseLive = errors.New("ledger: an authorized worker's lease is live")
	// ErrAlreadyClaimed: the one reconciliation lookup of this attempt is already claimed.
	ErrAlreadyClaimed = errors.New("ledger: reconciliation already claimed")
	// ErrUnknownAccount: the account is not configured.
	ErrUnknownAccount = errors.New("ledger: unknown account")
	// ErrControlRaced: another operator created the same kill switch or policy row while this
	// change ran (possible at READ COMMITTED only); nothing was written. Look and try again.
	ErrControlRaced = errors.New("ledger: the control was created by another change at the same time")
	// ErrObjectNotSent: a resolve as failed named an object. Failed means nothing was sent, and a
	// failed intent may be retried: with an object on the platform, a retry would post it twice.
	ErrObjectNotSent = errors.New("ledger: an intent resolved as failed names no object")
	// ErrAccountHolding: the intent's account holds (docs/design.md#account-health): Begin
	// opened no attempt, and the intent waits pending until a probe, the account's healing or
	// an operator's resume lets it through.
	ErrAccountHolding = errors.New("ledger: the account holds: no attempt while its platform cannot take anything")
	// ErrNotDue: the intent's not_before is still ahead: Begin opened no attempt and changed
	// nothing (BeginResult.NotBefore says until when to wait).
	ErrNotDue = errors.New("ledger: not_before is still ahead: no attempt before it")
	// ErrExpired: the intent's expires_at has passed: Begin parked it expired instead of
	// opening an attempt, and it is never sent.
	ErrExpired = errors.New("ledger: expires_at has passed, intent parked")
)

// RefusedError is returned for an operation the ledger refused: Err is one of the sentinels
// above (match it with errors.Is), State the intent's state when it was refused.
type RefusedError struct {
	Op    Operation
	Err   error
	State State
}

func (e *RefusedError) Error() string {
	if e.State == "" {
		return fmt.Sprintf("%s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("%s: %v (intent is %s)", e.Op, e.Err, e.State)
}

func (e *RefusedError) Unwrap() error { return e.Err }

func refused(op Operation, err error, state State) error {
	return &RefusedError{Op: op, Err: err, State: state}
}

// ErrMalformedOutcome: Complete was given an outcome it cannot record (a result or reason
// outside the table, a detail that does not encode). Trying again cannot help; an outcome
// recorded as unknown always can be.
var ErrMalformedOutcome = errors.New("ledger: malformed outcome")

// Permanent reports whether err can never succeed on a retry of the same call: a malformed
// outcome, or data the database refuses (SQLSTATE classes 22 and 23, and 54: a value past one
// of its limits). A lost connection, a timeout or exhausted serialization restarts are not
// permanent.
func Permanent(err error) bool {
	if errors.Is(err, ErrMalformedOutcome) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23") || strings.HasPrefix(pgErr.Code, "54"))
}
