package dispatch

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// NotDueHold is the longest a work item waits, NAK'd with a delay, for its intent's not_before:
// an intent due later is let go and brought back by the sweeper once due
// (ledger.StrandedPending), so that a calendar of intents scheduled far ahead does not fill
// the consumer's pending acknowledgements.
const NotDueHold = 5 * time.Minute

// begin opens one attempt per intent, binding the prepared request's hash to it.
func (d *Dispatcher) begin(ctx context.Context, batch []*work) []*work {
	if len(batch) == 0 {
		return nil
	}
	reqs := make([]ledger.BeginRequest, len(batch))
	for i, w := range batch {
		// The attempt tokens are minted here, so that after a Begin whose outcome is unknown
		// the dispatcher can learn which claims are its own.
		token, err := identity.NewAttemptToken()
		if err != nil {
			d.log.Warn("minting attempt tokens failed; the batch will be redelivered", zap.Error(err))
			return d.delayAll(batch, "ledger_unavailable", time.Second)
		}
		reqs[i] = ledger.BeginRequest{Key: w.intent.Key, RequestHash: w.prepared.Hash, Acknowledged: w.acknowledged(), Token: token}
	}
	d.startSteps(batch, tracing.SpanBegin)
	lctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
	defer cancel()
	results, err := d.ledger.BeginMany(lctx, reqs, d.cfg.ClaimLease)
	if err != nil {
		if results, err = d.ownClaims(ctx, reqs, err); err != nil {
			endSteps(batch, err)
			return d.delayAll(batch, "ledger_unavailable", time.Second)
		}
	}
	var keep []*work
	for i, w := range batch {
		r := results[i]
		switch {
		case r.Err == nil && r.Claim.CredentialVersion != w.credentialVersion:
			// The credential rotated between the gate read and Begin: the adapter holds the
			// old one. Nothing is sent; the claim expires and the work comes back.
			d.delay(w, "credential_changed", d.cfg.ClaimLease)
		case r.Err == nil:
			w.claim, w.outbox = r.Claim, r.Outbox
			endStep(w, "claimed", nil)
			if w.span.IsRecording() {
				w.span.SetAttributes(tracing.Attempt.String(r.Claim.Token.String()), tracing.Generation.Int64(r.Claim.Generation))
			}
			keep = append(keep, w)
		case errors.Is(r.Err, errNotLanded):
			d.delay(w, "ledger_unavailable", time.Second)
		case errors.Is(r.Err, ledger.ErrClaimed):
			// Another worker's claim is live; its lease decides.
			d.delay(w, "claimed_elsewhere", d.cfg.ClaimLease)
		case errors.Is(r.Err, ledger.ErrAccountHolding):
			// The account holds (it tripped since the gate looked, or another dispatcher took
			// the probe): no attempt was opened; the work waits for the probe's outcome.
			d.delay(w, "gated_"+string(ledger.ReasonHeld), d.heldWait())
		case errors.Is(r.Err, ledger.ErrNotDue):
			// not_before is ahead: no attempt was opened. Soon enough, the work item comes
			// back when it is due (one redelivery, no polling); later than that it is let go,
			// and the sweeper publishes the intent's work again once it is due, so that
			// intents scheduled far ahead hold no place among the consumer's pending acks.
			if wait := time.Until(r.NotBefore); wait <= NotDueHold {
				d.delay(w, "not_due", max(wait, 0)+time.Millisecond)
			} else {
				d.finish(w, "not_due_released")
			}
		case errors.Is(r.Err, ledger.ErrExpired):
			d.finish(w, "expired")
		case errors.Is(r.Err, ledger.ErrAttemptsExhausted):
			d.finish(w, "attempts_exhausted")
		case errors.Is(r.Err, ledger.ErrInvalidTransition), errors.Is(r.Err, ledger.ErrNotFound):
			d.finish(w, "not_pending")
		default:
			d.log.Warn("begin refused", zap.Stringer("delivery_key", w.intent.Key), zap.Error(r.Err))
			d.delay(w, "begin_refused", time.Second)
		}
	}
	return keep
}

// ownClaims answers a Begin whose error left its outcome unknown (a connection lost during
// COMMIT): the claims that stand under the dispatcher's own tokens go on at once; the others
// did not land, and their work comes back. Without this, a lost answer stranded the batch's
// claims for their whole lease. An error means not even that could be read.
func (d *Dispatcher) ownClaims(ctx context.Context, reqs []ledger.BeginRequest, failed error) ([]ledger.BeginResult, error) {
	d.log.Warn("begin failed and whether it committed is unknown; reading which claims are this dispatcher's", zap.Int("intents", len(reqs)), zap.Error(failed))
	rctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
	defer cancel()
	claims, err := d.ledger.OwnClaims(rctx, reqs)
	if err != nil {
		d.log.Warn("reading the claims failed too; the batch will be redelivered, and a claim that did land waits out its lease", zap.Error(err))
		return nil, err
	}
	own := make(map[identity.DeliveryKey]ledger.Claim, len(claims))
	for _, c := range claims {
		own[c.Key] = c
	}
	results := make([]ledger.BeginResult, len(reqs))
	for i, r := range reqs {
		if c, ok := own[r.Key]; ok {
			results[i].Claim = c
		} else {
			results[i].Err = errNotLanded
		}
	}
	d.log.Info("the claims that landed go on", zap.Int("landed", len(claims)), zap.Int("not_landed", len(reqs)-len(claims)))
	return results, nil
}

// errNotLanded is a claim of a Begin whose answer was lost that the ledger does not hold.
var errNotLanded = errors.New("the claim did not land")

// witnessClaims publishes the claims Begin just recorded. If JetStream does not acknowledge
// them, it will not acknowledge the authorizations either: rather than authorize attempts
// that could not be sent (each counts against the attempt cap), the work waits and the claims
// expire, abandoned, counting nothing.
func (d *Dispatcher) witnessClaims(ctx context.Context, batch []*work) []*work {
	if len(batch) == 0 {
		return nil
	}
	var written ledger.Written
	for _, w := range batch {
		w.addOutbox(&written, w.outbox)
	}
	wctx, cancel := context.WithTimeout(ctx, d.cfg.ClaimLease/2)
	defer cancel()
	if err := d.retry(wctx, func() error { return d.relay.PublishWritten(wctx, written) }); err != nil {
		d.log.Warn("JetStream did not acknowledge the claims; the work waits", zap.Int("intents", len(batch)), zap.Error(err))
		return d.delayAll(batch, "events_unavailable", d.cfg.ClaimLease)
	}
	return batch
}
