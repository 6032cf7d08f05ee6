package dispatch

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// notSent completes authorized attempts that were never sent, as not sent; err, the reason,
// ends the step under way.
func (d *Dispatcher) notSent(batch []*work, step string, err error) {
	for _, w := range batch {
		endStep(w, "", err)
		w.outcome = d.unsent(step, err)
		d.sending.Add(1)
		d.reports <- w
		d.sending.Done()
	}
}

// unsent is the outcome of an authorized attempt that step stopped before its first byte. Its
// signal is neutral: the dispatcher's own refusal says nothing of the platform, and must not
// hold an account whose platform never saw the request.
func (d *Dispatcher) unsent(step string, err error) ledger.Outcome {
	detail := map[string]any{"step": step}
	if err != nil {
		detail["error"] = err.Error()
	}
	d.counts.unsent(step)
	return ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed, Detail: detail, Signal: ledger.SignalNeutral}
}

// send makes the one send of an authorized attempt, reads back a claimed success, and hands
// the outcome to the completer.
func (d *Dispatcher) send(w *work) {
	defer d.sending.Done()
	d.crashPoint("before-send")
	if now := time.Now(); !now.Before(w.deadline) || !now.Round(0).Before(w.wallDeadline) {
		d.offTheReads()
		w.outcome = d.unsent("deadline", errors.New("the send deadline passed before the first byte"))
		d.reports <- w
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), minTime(w.deadline, time.Now().Add(d.cfg.SendTimeout)))
	d.startStep(w, tracing.SpanSend, trace.SpanKindClient)
	started := time.Now()
	o := w.adapter.Send(ctx, w.prepared)
	cancel()
	d.counts.sendDuration(time.Since(started))
	d.crashPoint("after-send")
	if w.step != nil {
		w.step.SetAttributes(tracing.Reason.String(string(o.Reason)), tracing.ObjectID.String(o.ObjectID))
	}
	endStep(w, string(o.Result), nil)
	w.outcome = ledger.Outcome{Result: o.Result, ObjectID: o.ObjectID, Reason: o.Reason, Detail: o.Detail, Signal: o.Signal}
	d.counts.send(string(o.Result))
	switch {
	case o.Result == platform.Sent && o.ObjectID != "" && w.adapter.Capabilities().ConfirmedByResponse:
		// The account's chosen proof is the answer itself: nothing to read back.
		d.offTheReads()
		w.outcome.Reason = ledger.ReasonPublishedUnread
	case o.Result == platform.Sent:
		d.startStep(w, tracing.SpanReadBack, trace.SpanKindClient)
		confirmed, detail := d.readBack(w, o.ObjectID)
		readOutcome := "not_confirmed"
		if confirmed {
			readOutcome = "confirmed"
		}
		endStep(w, readOutcome, nil)
		w.outcome.Confirmed = confirmed
		if w.outcome.Detail == nil {
			w.outcome.Detail = map[string]any{}
		}
		w.outcome.Detail["read_back"] = detail
	default:
		d.offTheReads()
	}
	d.reports <- w
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
