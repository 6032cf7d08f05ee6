package dispatch

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/ledger"
)

// completeLoop records outcomes in batches: whatever arrived while the previous batch was
// being written goes into the next one, with the outcomes still on their way that arrive
// within the linger (gather).
func (d *Dispatcher) completeLoop() {
	taken := func(w *work) {
		if w.sent {
			d.outstanding.Add(-1)
		}
	}
	for first := range d.reports {
		d.complete(gather(first, d.reports, d.cfg.Batch, &d.outstanding, nil, d.cfg.Linger, taken))
	}
}

// complete records a batch of outcomes, retrying while the ledger is unreachable (an outcome
// is evidence and is worth keeping even after the lease expired), then publishes the
// transitions and acknowledges the work.
func (d *Dispatcher) complete(batch []*work) {
	reports := make([]ledger.Report, len(batch))
	for i, w := range batch {
		reports[i] = ledger.Report{Claim: w.claim, Outcome: w.outcome}
		reports[i].Outcome.WitnessSeq = w.witnessSeq
	}
	d.startSteps(batch, tracing.SpanComplete)
	results, ok := d.record(reports)
	if !ok {
		for i, w := range batch {
			d.log.Error("outcome could not be recorded; the intent becomes indeterminate by lease expiry",
				zap.Stringer("delivery_key", w.intent.Key), zap.Stringer("attempt", w.claim.Token), zap.Int64("generation", w.claim.Generation),
				zap.String("result", string(reports[i].Outcome.Result)), zap.String("object_id", reports[i].Outcome.ObjectID))
			d.delay(w, "complete_failed", d.cfg.ClaimLease)
		}
		return
	}
	d.crashPoint("after-complete")
	var written ledger.Written
	for i, r := range results {
		batch[i].addOutbox(&written, r.Outbox)
	}
	pctx, cancel := context.WithTimeout(context.Background(), d.cfg.LedgerTimeout)
	_ = d.relay.AfterWrite(pctx, written)
	cancel()
	for i, w := range batch {
		r := results[i]
		if r.Err != nil {
			// Fenced: the lease expired first; the outcome is kept as evidence.
			d.log.Warn("completion fenced out; kept as evidence", zap.Stringer("delivery_key", w.intent.Key), zap.Error(r.Err))
			d.finish(w, "completion_fenced")
			continue
		}
		if r.Completion.Repeated {
			d.log.Info("the completion had landed though its answer was lost", zap.Stringer("delivery_key", w.intent.Key), zap.String("state", string(r.Completion.State)))
		}
		d.learn(w)
		d.counts.completion(string(r.Completion.State))
		if w.step != nil {
			w.step.SetAttributes(tracing.State.String(string(r.Completion.State)), tracing.Reason.String(string(r.Completion.Reason)))
		}
		endStep(w, string(r.Completion.State), nil)
		d.log.Debug("completed", zap.Stringer("delivery_key", w.intent.Key), zap.String("state", string(r.Completion.State)),
			zap.String("reason", string(r.Completion.Reason)), zap.Int64("generation", w.claim.Generation), zap.Int64("epoch", w.claim.Epoch))
		d.finish(w, "completed")
	}
}

// record writes outcomes, retrying while the ledger is unreachable: an outcome is evidence
// and worth keeping even after the lease expired. A batch the ledger refuses for good
// (ledger.Permanent) is split, and an outcome it refuses on its own is recorded as unknown
// (always a safe claim: indeterminate is reconciled, never resent). It gives up, reporting
// false, an in-flight lease plus a minute after it started.
func (d *Dispatcher) record(reports []ledger.Report) ([]ledger.CompletionResult, bool) {
	return d.recordUntil(reports, time.Now().Add(d.cfg.InFlightLease+time.Minute))
}

func (d *Dispatcher) recordUntil(reports []ledger.Report, giveUp time.Time) ([]ledger.CompletionResult, bool) {
	pause := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.LedgerTimeout)
		results, err := d.ledger.CompleteMany(ctx, reports)
		cancel()
		switch {
		case err == nil:
			return results, true
		case ledger.Permanent(err) && len(reports) > 1:
			out := make([]ledger.CompletionResult, 0, len(reports))
			for _, r := range reports {
				one, ok := d.recordUntil([]ledger.Report{r}, giveUp)
				if !ok {
					return nil, false
				}
				out = append(out, one...)
			}
			return out, true
		case ledger.Permanent(err) && reports[0].Outcome.Result != ledger.Unknown:
			d.log.Warn("the ledger refuses this outcome; recording it as unknown", zap.Stringer("delivery_key", reports[0].Claim.Key), zap.Error(err))
			reports = []ledger.Report{{Claim: reports[0].Claim, Outcome: ledger.Outcome{Result: ledger.Unknown, Reason: ledger.ReasonSendUnknown,
				Detail: map[string]any{"step": "complete", "refused_outcome": string(reports[0].Outcome.Result)}}}}
			continue
		}
		if time.Now().After(giveUp) {
			return nil, false
		}
		d.log.Warn("recording the outcomes failed and whether the commit landed is unknown; writing them again", zap.Int("outcomes", len(reports)), zap.Error(err), zap.Duration("in", pause))
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Second)
	}
}
