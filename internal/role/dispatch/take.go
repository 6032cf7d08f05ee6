package dispatch

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/natsconn"
	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// take waits for the first work item (a free slot first), then takes whatever else is already
// waiting, up to a batch and the free slots. It returns nothing once ctx ended.
//
// One pipeline takes at a time; the others wait for it to be done. Work arrives in bursts
// (ingest publishes the work items of a batch together), and pipelines taking at once
// shared each burst between them, every share paying the ledger's cost per batch (its
// statements and commits, the claims' publication): at 1,000 intents a second the
// dispatcher's batches held half of what ingest's did. A pipeline that waits meanwhile takes
// what arrived while the first one was taking.
func (d *Dispatcher) take(ctx context.Context, msgs <-chan jetstream.Msg) []jetstream.Msg {
	d.taking.Lock()
	defer d.taking.Unlock()
	select {
	case d.slots <- struct{}{}:
	case <-ctx.Done():
		return nil
	}
	var batch []jetstream.Msg
	select {
	case m, ok := <-msgs:
		if !ok {
			<-d.slots
			return nil
		}
		batch = append(batch, m)
	case <-ctx.Done():
		<-d.slots
		return nil
	}
	// Whatever else arrives joins the batch until the burst is over (nothing more within the
	// gap after the latest item) or the linger has passed: under load the batch fills at once,
	// a burst is taken whole, and the first item of a burst waits for its rest, not for the
	// linger to run out behind it.
	linger := time.NewTimer(d.cfg.Linger)
	defer linger.Stop()
	gap := time.NewTimer(d.cfg.gap)
	defer gap.Stop()
	for len(batch) < d.cfg.Batch {
		select {
		case d.slots <- struct{}{}:
		default:
			return batch
		}
		select {
		case m, ok := <-msgs:
			if !ok {
				<-d.slots
				return batch
			}
			batch = append(batch, m)
			gap.Reset(d.cfg.gap)
		case <-gap.C:
			<-d.slots
			return batch
		case <-linger.C:
			<-d.slots
			return batch
		}
	}
	return batch
}

// parse reads the work items; one that cannot be read is terminated (it can never be worked)
// and a second item for an intent already in the batch waits for the first to finish.
func (d *Dispatcher) parse(msgs []jetstream.Msg) []*work {
	seen := make(map[identity.DeliveryKey]bool, len(msgs))
	batch := make([]*work, 0, len(msgs))
	for _, m := range msgs {
		w := &work{msg: m}
		w.ctx, w.span = d.tracer.Start(tracecontext.Extract(context.Background(), m.Headers()), tracing.SpanDispatch, trace.WithSpanKind(trace.SpanKindConsumer))
		item, err := events.UnmarshalWorkItem(m.Data())
		if err != nil {
			d.log.Error("unreadable work item terminated", zap.String("subject", m.Subject()), zap.Error(err))
			_ = m.TermWithReason("unreadable work item")
			d.counts.work("unreadable")
			d.release(w, "unreadable")
			continue
		}
		w.item = item
		if w.span.IsRecording() {
			w.span.SetAttributes(tracing.DeliveryKey.String(item.DeliveryKey.String()), tracing.Account.String(item.Account))
		}
		if seen[item.DeliveryKey] {
			d.delay(w, "repeated", d.cfg.ClaimLease)
			continue
		}
		seen[item.DeliveryKey] = true
		w.stop = natsconn.KeepAlive(m, d.cfg.AckWait/3)
		batch = append(batch, w)
	}
	return batch
}

// pending keeps the work whose intent is pending; the rest is acknowledged and ignored.
func (d *Dispatcher) pending(ctx context.Context, batch []*work) []*work {
	if len(batch) == 0 {
		return nil
	}
	keys := make([]identity.DeliveryKey, len(batch))
	for i, w := range batch {
		keys[i] = w.item.DeliveryKey
	}
	lctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
	defer cancel()
	intents, err := d.ledger.GetMany(lctx, keys)
	if err != nil {
		d.log.Warn("ledger read failed; the batch will be redelivered", zap.Error(err))
		return d.delayAll(batch, "ledger_unavailable", time.Second)
	}
	var keep []*work
	for _, w := range batch {
		in, ok := intents[w.item.DeliveryKey]
		switch {
		case !ok:
			d.log.Warn("work item for an intent the ledger does not hold", zap.Stringer("delivery_key", w.item.DeliveryKey))
			d.finish(w, "no_intent")
		case in.State != ledger.Pending:
			d.finish(w, "not_pending")
		default:
			w.intent = in
			keep = append(keep, w)
		}
	}
	return keep
}

// fresh is the freshness fence, in front of everything that costs: intents resting on a source
// version that is no longer the stored head can never be authorized (superseded_source), so
// they are parked here, before a request is rendered, an attempt opened or a rate token spent,
// and a backlog of outdated intents fails cheaply. Only intents nobody holds are fenced here;
// a claimed one, and one that changed since it was read, go on as before, and Authorize
// re-checks the same condition for every intent. A batch without sources costs nothing here,
// and one whose sources are all fresh costs a read: ParkSuperseded, which would find the same
// intents by itself, locks every row it is given, so it is given only what the read found.
func (d *Dispatcher) fresh(ctx context.Context, batch []*work) []*work {
	var sourced []identity.DeliveryKey
	for _, w := range batch {
		if w.intent.SourceID != "" && w.intent.LeaseExpiresAt == nil {
			sourced = append(sourced, w.intent.Key)
		}
	}
	if len(sourced) == 0 {
		return batch
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
	superseded, err := d.ledger.Superseded(rctx, sourced)
	cancel()
	if err != nil {
		d.log.Warn("ledger read failed; the batch will be redelivered", zap.Error(err))
		return d.delayAll(batch, "ledger_unavailable", time.Second)
	}
	if len(superseded) == 0 {
		return batch
	}
	stale := make([]identity.DeliveryKey, 0, len(superseded))
	for k := range superseded {
		stale = append(stale, k)
	}
	pctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
	parked, err := d.ledger.ParkSuperseded(pctx, stale)
	cancel()
	if err != nil {
		d.log.Warn("parking superseded intents failed; the batch will be redelivered", zap.Error(err))
		return d.delayAll(batch, "ledger_unavailable", time.Second)
	}
	if len(parked) == 0 {
		return batch
	}
	d.log.Info("intents on a superseded source parked before any attempt", zap.Int("intents", len(parked)))
	keys := make([]identity.DeliveryKey, 0, len(parked))
	for k := range parked {
		keys = append(keys, k)
	}
	if err := d.publishFor(ctx, keys); err != nil {
		d.log.Warn("publishing the parked intents failed; the outbox keeps them", zap.Error(err))
	}
	keep := batch[:0]
	for _, w := range batch {
		if parked[w.intent.Key] {
			d.finish(w, "parked_superseded")
		} else {
			keep = append(keep, w)
		}
	}
	return keep
}
