package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// Claim is one attempt on one intent, as Begin opened it. The worker carries it to Authorize
// and Complete; (Epoch, Generation) is its fence.
type Claim struct {
	Key   identity.DeliveryKey
	Token identity.AttemptToken
	// Epoch is the restore epoch the attempt was opened in; Generation comes from the
	// attempt_generation sequence. Together they are the fence every later call is checked on.
	Epoch      int64
	Generation int64
	// RequestHash is the hash of the exact wire request, bound to the attempt: Authorize
	// refuses any other.
	RequestHash [32]byte
	// CredentialVersion is the account's credential version when the attempt was opened.
	CredentialVersion int64
	// LeaseExpiresAt is the deadline of the pre-authorization lease, on the database's clock.
	LeaseExpiresAt time.Time
}

// Begin opens one attempt on a pending intent and returns its claim. It is the only creator
// of attempt rows. It is refused with ErrClaimed while another attempt's pre-authorization
// lease is live (so a worker restarted after a crash before Authorize cannot claim twice), and
// with ErrInvalidTransition unless the intent is pending. An earlier claim whose lease expired
// is closed as abandoned first. When the attempt cap is reached, Begin parks the intent and
// returns ErrAttemptsExhausted.
func (l *Ledger) Begin(ctx context.Context, key identity.DeliveryKey, requestHash [32]byte, lease time.Duration) (Claim, error) {
	if lease <= 0 {
		return Claim{}, fmt.Errorf("begin: lease must be positive, got %s", lease)
	}
	token, err := identity.NewAttemptToken()
	if err != nil {
		return Claim{}, fmt.Errorf("begin: %w", err)
	}
	var row dbsqlc.IntentBeginRow
	err = l.inTx(ctx, OpBegin, func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentBegin(ctx, dbsqlc.IntentBeginParams{
			DeliveryKey:  key.Bytes(),
			AttemptToken: token.Bytes(),
			LeaseMs:      lease.Milliseconds(),
			RequestHash:  requestHash[:],
			Actor:        l.cfg.Actor,
		})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Claim{}, refused(OpBegin, ErrNotFound, "")
	}
	if err != nil {
		return Claim{}, fmt.Errorf("begin %s: %w", key, err)
	}
	prior := State(row.PriorState)
	switch {
	case row.Outcome == "exhausted" && row.NewState.String == string(Parked):
		return Claim{}, refused(OpBegin, ErrAttemptsExhausted, prior)
	case row.Outcome == "invalid_transition":
		return Claim{}, refused(OpBegin, ErrInvalidTransition, prior)
	case row.Outcome != "claim" || row.AttemptsWritten != 1 || row.LeaseExpiresAt == nil:
		// A live claim, or (impossible under the row lock) a claim lost between the look and
		// the update: either way another attempt holds the intent.
		return Claim{}, refused(OpBegin, ErrClaimed, prior)
	}
	return Claim{
		Key:               key,
		Token:             token,
		Epoch:             row.Epoch.Int64,
		Generation:        row.Generation.Int64,
		RequestHash:       requestHash,
		CredentialVersion: row.CredentialVersion,
		LeaseExpiresAt:    *row.LeaseExpiresAt,
	}, nil
}
