package dispatch

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// work is one work item on its way through the dispatcher.
type work struct {
	msg      jetstream.Msg
	item     events.WorkItem
	intent   ledger.Intent
	request  platform.Request
	adapter  platform.Adapter
	prepared platform.Prepared
	claim    ledger.Claim
	// reserved: the gate set a rate token aside for this work until Authorize takes it.
	reserved bool
	// trial: the one send of a cold account this dispatcher lets through (cold.go).
	trial bool
	// credentialVersion is the one the adapter was opened with.
	credentialVersion int64
	// deadline is when the send's context ends, on this process's monotonic clock;
	// wallDeadline the same instant on the wall clock, which also runs while the host is
	// suspended (the monotonic clock does not).
	deadline     time.Time
	wallDeadline time.Time
	outcome      ledger.Outcome
	// stop ends the InProgress keep-alive of msg.
	stop func()
	// unsendable is why the adapter cannot render the request (platform.ErrUnsendable).
	unsendable error
	// parentObject is, for a reply, the object its published parent created: its target.
	parentObject string
	// resolve: a reply whose adapter reads more of the parent (platform.ReplyResolver) before
	// it can prepare; stage resolves and prepares it.
	resolve bool
	// sent: the work's send was started and counted in Dispatcher.outstanding.
	sent bool
	// witnessSeq is the stream sequence JetStream named when it acknowledged the attempt's
	// authorized event; Complete records it with the outcome.
	witnessSeq uint64
	// outbox is what the outbox held of the intent once this dispatcher's last write of it
	// (Begin, Authorize) committed, as the write named it: what the next publication sends.
	outbox ledger.Outboxed
	// span is the work item's dispatch span, ctx its context; step is the span of the step
	// under way, if any (steps are timed only while span records).
	span trace.Span
	ctx  context.Context
	step trace.Span
}

// addOutbox adds to written what the outbox held of w's intent once this dispatcher's write of
// it committed, but the transitions its work item followed, which are in the stream already
// and their publisher's to remove.
func (w *work) addOutbox(written *ledger.Written, o ledger.Outboxed) {
	written.AddAfter(w.intent.Key, o, w.acknowledged())
}

// acknowledged is the sequence up to which w's work item says JetStream holds its intent's
// events (events.WorkItem.Follows), never past the intent's latest transition as the
// dispatcher read it: a work item that claimed more (a bug, or a message published on the
// dispatch subjects by someone else) would have the dispatcher's own transitions left out.
func (w *work) acknowledged() int64 { return min(w.item.Acknowledged(), w.intent.Seq) }

// endKeepAlive stops the work item's reminders to JetStream. Before its Ack or NAK: a reminder
// that reached the server after a NAK would set the redelivery back to a whole AckWait.
func (w *work) endKeepAlive() {
	if w.stop != nil {
		w.stop()
	}
}

// release ends a work item's hold on its slot, and its spans with result: what became of it.
func (d *Dispatcher) release(w *work, result string) {
	w.endKeepAlive()
	d.unreserve(w)
	d.endTrial(w)
	endStep(w, result, nil)
	if w.span != nil {
		if w.span.IsRecording() {
			w.span.SetAttributes(tracing.Outcome.String(result))
		}
		w.span.End()
	}
	<-d.slots
}

// startStep starts w's span of step, a child of its dispatch span, ending the one before.
// Steps are timed only for a dispatch span that records: with the no-op provider (or an
// unsampled trace) this costs a check.
func (d *Dispatcher) startStep(w *work, step string, kind trace.SpanKind) {
	endStep(w, "", nil)
	if w.span == nil || !w.span.IsRecording() {
		return
	}
	_, w.step = d.tracer.Start(w.ctx, step, trace.WithSpanKind(kind))
}

// startSteps starts the span of step for every work of batch.
func (d *Dispatcher) startSteps(batch []*work, step string) {
	for _, w := range batch {
		d.startStep(w, step, trace.SpanKindInternal)
	}
}

// endStep ends w's step under way, if any, with its outcome ("" for none) and error.
func endStep(w *work, outcome string, err error) {
	if w.step == nil {
		return
	}
	if outcome != "" {
		w.step.SetAttributes(tracing.Outcome.String(outcome))
	}
	if err != nil {
		w.step.RecordError(err)
		w.step.SetStatus(codes.Error, err.Error())
	}
	w.step.End()
	w.step = nil
}

// endSteps ends the steps of batch with err, the batch's own failure.
func endSteps(batch []*work, err error) {
	for _, w := range batch {
		endStep(w, "", err)
	}
}

// unreserve gives back the rate token the gate set aside for w, once Authorize took it from
// the bucket (or w will not reach Authorize).
func (d *Dispatcher) unreserve(w *work) {
	if !w.reserved {
		return
	}
	w.reserved = false
	d.rate.Lock()
	defer d.rate.Unlock()
	if d.reserved[w.intent.Account]--; d.reserved[w.intent.Account] <= 0 {
		delete(d.reserved, w.intent.Account)
	}
}

// finish acknowledges a work item whose intent needs nothing more from this message.
func (d *Dispatcher) finish(w *work, result string) {
	w.endKeepAlive()
	if err := w.msg.Ack(); err != nil {
		d.log.Debug("ack failed; the work item will come back and be ignored", zap.Error(err))
	}
	d.counts.work(result)
	d.release(w, result)
}

// delay gives a work item back to JetStream, to be delivered again after wait.
func (d *Dispatcher) delay(w *work, result string, wait time.Duration) {
	w.endKeepAlive()
	if err := w.msg.NakWithDelay(wait); err != nil {
		d.log.Debug("nak failed; the work item comes back after the ack wait", zap.Error(err))
	}
	d.counts.work(result)
	d.release(w, result)
}

func (d *Dispatcher) delayAll(batch []*work, result string, wait time.Duration) []*work {
	for _, w := range batch {
		d.delay(w, result, wait)
	}
	return nil
}
