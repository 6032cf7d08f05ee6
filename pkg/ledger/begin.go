package ledger

import (
	"context"
	"fmt"
	"time"

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
	// Acknowledged is BeginRequest.Acknowledged, carried to Authorize and Complete.
	Acknowledged int64
}

// BeginRequest asks for one attempt on one intent.
type BeginRequest struct {
	Key identity.DeliveryKey
	// RequestHash is the hash of the exact wire request the attempt will send.
	RequestHash [32]byte
	// Token is the attempt token the caller minted for the attempt (identity.NewAttemptToken),
	// so that after an error whose outcome is unknown it can ask OwnClaims which of its claims
	// stand; zero means Begin mints one.
	Token identity.AttemptToken
	// Acknowledged is the sequence up to which JetStream acknowledged the intent's transitions
	// before the caller took it up (the dispatcher's work item followed them,
	// events.WorkItem.Follows); 0 for none. The outbox reads behind Begin, Authorize and
	// Complete leave those rows out of what the writes name (Outboxed): their publisher
	// removes them.
	Acknowledged int64
}

// BeginResult is the answer to one BeginRequest: a Claim, or Err, a *RefusedError.
type BeginResult struct {
	Claim Claim
	Err   error
	// Outbox is what Begin left in the outbox of the intent (the claim or the park, a stale
	// claim's abandonment before either), for its writer to publish.
	Outbox Outboxed
	// NotBefore is the intent's not_before when Err is ErrNotDue: the work waits until then.
	NotBefore time.Time
}

// Begin opens one attempt on a pending intent and returns its claim. It is the only creator
// of attempt rows. It is refused with ErrClaimed while another attempt's pre-authorization
// lease is live (so a worker restarted after a crash before Authorize cannot claim twice), and
// with ErrInvalidTransition unless the intent is pending. An earlier claim whose lease expired
// is closed as abandoned first. When the attempt cap is reached, Begin parks the intent and
// returns ErrAttemptsExhausted. At or after the intent's expires_at it parks it expired and
// returns ErrExpired; before its not_before it opens nothing and returns ErrNotDue. While the intent's account holds (AccountHealth), Begin opens
// no attempt and returns ErrAccountHolding, except for the one intent that takes a due probe.
func (l *Ledger) Begin(ctx context.Context, key identity.DeliveryKey, requestHash [32]byte, lease time.Duration) (Claim, error) {
	res, err := l.BeginMany(ctx, []BeginRequest{{Key: key, RequestHash: requestHash}}, lease)
	if err != nil {
		return Claim{}, err
	}
	return res[0].Claim, res[0].Err
}

// BeginMany is Begin for a batch of distinct intents in one statement: each gets its own
// answer, in input order. The error is for the batch as a whole (the database, bad input).
func (l *Ledger) BeginMany(ctx context.Context, reqs []BeginRequest, lease time.Duration) ([]BeginResult, error) {
	if lease < MinLease {
		return nil, fmt.Errorf("begin: lease %s is shorter than %s", lease, MinLease)
	}
	index, err := indexKeys(len(reqs), func(i int) identity.DeliveryKey { return reqs[i].Key })
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	p := dbsqlc.IntentsBeginParams{LeaseMs: lease.Milliseconds(), Actor: l.cfg.Actor}
	tokens := make([]identity.AttemptToken, len(reqs))
	for i, r := range reqs {
		tokens[i] = r.Token
		if tokens[i] == (identity.AttemptToken{}) {
			if tokens[i], err = identity.NewAttemptToken(); err != nil {
				return nil, fmt.Errorf("begin: %w", err)
			}
		}
		p.DeliveryKeys = append(p.DeliveryKeys, r.Key.Bytes())
		p.AttemptTokens = append(p.AttemptTokens, tokens[i].Bytes())
		p.RequestHashes = append(p.RequestHashes, r.RequestHash[:])
	}
	var rows []dbsqlc.IntentsBeginRow
	var before earlier
	err = l.inTxForgetting(ctx, string(OpBegin), l.earlierBehind(p.DeliveryKeys, func(i int) int64 { return reqs[i].Acknowledged }, &before), func(q *dbsqlc.Queries) (err error) {
		p.Writer = before.writer
		rows, err = q.IntentsBegin(ctx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("begin %d intents: %w", len(reqs), err)
	}
	out := make([]BeginResult, len(reqs))
	own := make([][]Unpublished, len(reqs))
	for _, row := range rows {
		i, err := index.of(row.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("begin: %w", err)
		}
		if own[i], err = addOutboxed(own[i], outboxed{row.DeliveryKey, row.Older, row.OutSeq, row.OutDispatch, row.OutAccount,
			row.OutFrom, row.OutTo, row.OutReason, row.OutToken, row.OutEpoch, row.OutGeneration, row.OutActor, row.OutAt, row.OutTraceparent}); err != nil {
			return nil, fmt.Errorf("begin: %w", err)
		}
		if row.Older {
			continue
		}
		prior := State(row.PriorState.String)
		switch {
		case !row.Outcome.Valid:
			out[i].Err = refused(OpBegin, ErrNotFound, "")
		case row.Outcome.String == "exhausted" && row.NewState.String == string(Parked):
			out[i].Err = refused(OpBegin, ErrAttemptsExhausted, prior)
		case row.Outcome.String == "invalid_transition":
			out[i].Err = refused(OpBegin, ErrInvalidTransition, prior)
		case row.Outcome.String == "holding":
			out[i].Err = refused(OpBegin, ErrAccountHolding, prior)
		case row.Outcome.String == "not_due" && row.NotBefore != nil:
			out[i].Err, out[i].NotBefore = refused(OpBegin, ErrNotDue, prior), *row.NotBefore
		case row.Outcome.String == "expired" && row.NewState.String == string(Parked):
			out[i].Err = refused(OpBegin, ErrExpired, prior)
		case row.Outcome.String != "claim" || !row.AttemptWritten || row.LeaseExpiresAt == nil:
			// A live claim, or (impossible under the row lock) a claim lost between the look
			// and the update: either way another attempt holds the intent.
			out[i].Err = refused(OpBegin, ErrClaimed, prior)
		default:
			out[i].Claim = Claim{
				Key:               reqs[i].Key,
				Token:             tokens[i],
				Epoch:             row.Epoch.Int64,
				Generation:        row.Generation.Int64,
				RequestHash:       reqs[i].RequestHash,
				CredentialVersion: row.CredentialVersion.Int64,
				LeaseExpiresAt:    *row.LeaseExpiresAt,
				Acknowledged:      reqs[i].Acknowledged,
			}
		}
	}
	for i := range out {
		out[i].Outbox = before.outboxed(reqs[i].Key, own[i])
	}
	return out, nil
}

// OwnClaims returns, of the claims reqs asked Begin for with the caller's own tokens, those
// that stand (pending, claimed by that token, the lease not run out), in no particular order:
// after a BeginMany whose error leaves its outcome unknown (a connection lost during COMMIT),
// the caller learns which claims are its own and goes on with them at once instead of leaving
// them to their lease. A claim it does not return did not land, or has expired: the intent
// is not the caller's. A read of a commit still under way may miss it; that claim then expires
// as it would have, and nothing is sent on it.
func (l *Ledger) OwnClaims(ctx context.Context, reqs []BeginRequest) ([]Claim, error) {
	var p dbsqlc.IntentsOwnClaimsParams
	byToken := make(map[identity.AttemptToken]BeginRequest, len(reqs))
	for _, r := range reqs {
		if r.Token == (identity.AttemptToken{}) {
			continue
		}
		byToken[r.Token] = r
		p.DeliveryKeys = append(p.DeliveryKeys, r.Key.Bytes())
		p.AttemptTokens = append(p.AttemptTokens, r.Token.Bytes())
	}
	if len(byToken) == 0 {
		return nil, nil
	}
	var rows []dbsqlc.IntentsOwnClaimsRow
	err := l.scan(ctx, "own claims", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsOwnClaims(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Claim, 0, len(rows))
	for _, row := range rows {
		token, err := identity.AttemptTokenFromBytes(row.AttemptToken)
		if err != nil {
			return nil, fmt.Errorf("own claims: %w", err)
		}
		key, err := identity.DeliveryKeyFromBytes(row.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("own claims: %w", err)
		}
		r, ok := byToken[token]
		if !ok || r.Key != key {
			continue
		}
		out = append(out, Claim{Key: r.Key, Token: token, Epoch: row.Epoch.Int64, Generation: row.Generation.Int64, RequestHash: r.RequestHash,
			CredentialVersion: row.CredentialVersion, LeaseExpiresAt: row.LeaseExpiresAt, Acknowledged: r.Acknowledged})
	}
	return out, nil
}
