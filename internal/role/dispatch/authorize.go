package dispatch

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/ledger"
)

// authorize is the before-byte checkpoint, one statement per contract version. The send
// deadline of each authorized intent counts from before the call.
func (d *Dispatcher) authorize(ctx context.Context, batch []*work) []*work {
	groups := map[string][]*work{}
	var order []string
	for _, w := range batch {
		c := w.adapter.Capabilities().ContractVersion
		if _, ok := groups[c]; !ok {
			order = append(order, c)
		}
		groups[c] = append(groups[c], w)
	}
	var keep []*work
	for _, contract := range order {
		group := groups[contract]
		claims := make([]ledger.Claim, len(group))
		for i, w := range group {
			claims[i] = w.claim
		}
		var start time.Time
		var results []ledger.AuthorizationResult
		var err error
		d.startSteps(group, tracing.SpanAuthorize)
		begun := time.Now()
		for pause := 20 * time.Millisecond; ; pause *= 2 {
			start = time.Now() // monotonic: the lease cannot have started before this
			actx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
			results, err = d.ledger.AuthorizeMany(actx, claims, d.cfg.InFlightLease, contract)
			cancel()
			// Restarted too often (SERIALIZABLE under contention): certainly not committed, and
			// the claims are still ours until their lease runs out, so try again rather than
			// let them expire with the work.
			if !errors.Is(err, ledger.ErrRetriesExhausted) || time.Since(begun) > d.cfg.ClaimLease/3 {
				break
			}
			d.log.Info("authorize restarted too often; trying again", zap.Int("claims", len(claims)))
			time.Sleep(pause + time.Duration(rand.Int64N(int64(pause))))
		}
		if err != nil {
			// Unknown whether it committed; nothing is sent either way. Were it committed, the
			// intents would expire into indeterminate although nothing left, so record that
			// nothing did: the fence makes this a no-op where Authorize did not commit.
			d.log.Warn("authorize failed; nothing sent, the batch will be redelivered", zap.Error(err))
			endSteps(group, err)
			reports := make([]ledger.Report, len(group))
			for i, w := range group {
				reports[i] = ledger.Report{Claim: w.claim, Outcome: ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed,
					Detail: map[string]any{"step": "authorize", "error": err.Error()}, Signal: ledger.SignalNeutral}}
			}
			cctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
			_, _ = d.ledger.CompleteMany(cctx, reports)
			cancel()
			d.delayAll(group, "ledger_unavailable", time.Second)
			continue
		}
		for _, w := range group {
			d.unreserve(w) // the bucket now says what Authorize took
		}
		deadline := start.Add(d.cfg.InFlightLease - d.cfg.Margin)
		wallDeadline := start.Round(0).Add(d.cfg.InFlightLease - d.cfg.Margin)
		for i, w := range group {
			r := results[i]
			switch {
			case r.Err != nil && errors.Is(r.Err, ledger.ErrLeaseLost):
				// Our claim expired before we authorized: nothing was sent; the next Begin
				// closes the abandoned attempt.
				d.delay(w, "lease_lost", 0)
			case r.Err != nil:
				d.finish(w, "fenced")
			case r.Authorization.Reason == ledger.ReasonHeld:
				// The account tripped since Begin: the claim ended, nothing was sent, no
				// attempt spent, and the intent is pending with no other work item: this one
				// waits for the account.
				d.delay(w, "held", d.heldWait())
			case r.Authorization.Reason == ledger.ReasonNotDue:
				// not_before is ahead of the authorizing clock (Begin's clock saw it due): the
				// claim ended, nothing was sent; the work comes back shortly and Begin decides.
				d.delay(w, "not_due", time.Second)
			case !r.Authorization.Authorized():
				d.finish(w, "refused_"+string(r.Authorization.Reason))
			default:
				w.deadline, w.wallDeadline, w.outbox = deadline, wallDeadline, r.Outbox
				endStep(w, "authorized", nil)
				keep = append(keep, w)
			}
		}
	}
	return keep
}
