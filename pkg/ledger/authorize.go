package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/identity"
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
	// authorized: for the record, not for the worker's own timing. A worker derives its
	// send deadline from its own monotonic clock read BEFORE calling Authorize, plus the
	// in-flight duration, minus a safety margin; then no clock skew can make it send late.
	LeaseExpiresAt time.Time
}

// Authorized reports whether the send may go ahead.
func (a Authorization) Authorized() bool { return a.State == Authorized }

// failedReasons are the refusals at authorization that end an attempt in failed; every other
// refusal parks. Derived from atmosttype.Reasons, so the SQL never holds a second copy of the mapping.
var failedReasons = func() []string {
	var out []string
	for r, rule := range atmosttype.Reasons() {
		if rule.State == Failed {
			out = append(out, string(r))
		}
	}
	return out
}()

// AuthorizationResult is the answer for one claim of AuthorizeMany: an Authorization, or Err,
// a *RefusedError when the claim's fence no longer held.
type AuthorizationResult struct {
	Authorization Authorization
	Err           error
	// Outbox is what the authorization left in the outbox of the intent, for its writer to
	// publish: an authorized transition among it is the witness.
	Outbox Outboxed
}

// Authorize is the before-byte checkpoint, to be called immediately before the first byte.
// It checks the claim's fence (ErrInvalidTransition, ErrLeaseLost, ErrFenced or
// ErrRequestMismatch, changing nothing) and then re-checks every gate; a refusal is not an
// error but an Authorization in Failed or Parked, which ends the attempt. contractVersion is
// the platform contract the adapter speaks; an account that pins another is refused.
func (l *Ledger) Authorize(ctx context.Context, c Claim, inFlight time.Duration, contractVersion string) (Authorization, error) {
	res, err := l.AuthorizeMany(ctx, []Claim{c}, inFlight, contractVersion)
	if err != nil {
		return Authorization{}, err
	}
	return res[0].Authorization, res[0].Err
}

// AuthorizeMany is Authorize for a batch of claims on distinct intents, in one statement: each
// gets its own answer, in input order. The batch shares each account's rate bucket (tokens go
// to the intents in stored order: created_at, then the place in the batch that stored them)
// and, for the same text of one account, its one text claim, which goes to the intent stored
// first, unless an intent stored before it still waits to be sent, in this batch or not
// (docs/design.md#the-duplicate-text-window).
func (l *Ledger) AuthorizeMany(ctx context.Context, claims []Claim, inFlight time.Duration, contractVersion string) ([]AuthorizationResult, error) {
	if inFlight < MinLease {
		return nil, fmt.Errorf("authorize: in-flight lease %s is shorter than %s", inFlight, MinLease)
	}
	index, err := indexKeys(len(claims), func(i int) identity.DeliveryKey { return claims[i].Key })
	if err != nil {
		return nil, fmt.Errorf("authorize: %w", err)
	}
	p := dbsqlc.IntentsAuthorizeParams{
		ContractVersion: contractVersion,
		FailedReasons:   failedReasons,
		AlwaysRetried:   alwaysRetried(),
		InFlightMs:      inFlight.Milliseconds(),
		Now:             l.clock(),
		Actor:           l.cfg.Actor,
	}
	for _, c := range claims {
		p.DeliveryKeys = append(p.DeliveryKeys, c.Key.Bytes())
		p.AttemptTokens = append(p.AttemptTokens, c.Token.Bytes())
		p.Epochs = append(p.Epochs, c.Epoch)
		p.Generations = append(p.Generations, c.Generation)
		p.RequestHashes = append(p.RequestHashes, c.RequestHash[:])
	}
	var rows []dbsqlc.IntentsAuthorizeRow
	var before earlier
	err = l.inTxForgetting(ctx, string(OpAuthorize), l.earlierBehind(p.DeliveryKeys, func(i int) int64 { return claims[i].Acknowledged }, &before), func(q *dbsqlc.Queries) (err error) {
		p.Writer = before.writer
		rows, err = q.IntentsAuthorize(ctx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("authorize %d claims: %w", len(claims), err)
	}
	out := make([]AuthorizationResult, len(claims))
	for _, row := range rows {
		i, err := index.of(row.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("authorize: %w", err)
		}
		own, err := addOutboxed(nil, outboxed{row.DeliveryKey, false, row.OutSeq, row.OutDispatch, row.OutAccount,
			row.OutFrom, row.OutTo, row.OutReason, row.OutToken, row.OutEpoch, row.OutGeneration, row.OutActor, row.OutAt, row.OutTraceparent})
		if err != nil {
			return nil, fmt.Errorf("authorize: %w", err)
		}
		out[i] = authorizationFrom(claims[i], row)
		out[i].Outbox = before.outboxed(claims[i].Key, own)
	}
	return out, nil
}

func authorizationFrom(c Claim, row dbsqlc.IntentsAuthorizeRow) AuthorizationResult {
	prior := State(row.PriorState.String)
	fail := func(err error) AuthorizationResult { return AuthorizationResult{Err: refused(OpAuthorize, err, prior)} }
	switch {
	case !row.Outcome.Valid:
		return AuthorizationResult{Err: refused(OpAuthorize, ErrNotFound, "")}
	case row.Outcome.String == "invalid_transition":
		return fail(ErrInvalidTransition)
	case row.Outcome.String == "fenced":
		return fail(ErrFenced)
	case row.Outcome.String == "request_mismatch":
		return fail(ErrRequestMismatch)
	case row.Outcome.String == "lease_lost" || !row.NewState.Valid:
		// !NewState.Valid: the fence held at the look but not at the update, which the row
		// lock makes impossible (on CockroachDB, the statement's one snapshot, whatever became
		// of the lock); report it as the lease it would be.
		return fail(ErrLeaseLost)
	}
	a := Authorization{State: State(row.NewState.String), Reason: Reason(row.Outcome.String)}
	if rule, ok := a.Reason.Rule(); !ok || rule.State != a.State {
		return AuthorizationResult{Err: fmt.Errorf("authorize %s: reason %q led to %s, which the reason table does not say", c.Key, a.Reason, a.State)}
	}
	if a.Authorized() {
		if row.LeaseExpiresAt == nil {
			return AuthorizationResult{Err: fmt.Errorf("authorize %s: authorized without a lease", c.Key)}
		}
		a.LeaseExpiresAt = *row.LeaseExpiresAt
	}
	return AuthorizationResult{Authorization: a}
}
