// Package dispatch is where bytes leave atmost. The dispatcher pool consumes work items from
// ATMOST_DISPATCH and, for each intent still pending: checks the cheap transient gates (while
// one refuses, no attempt is created and the work waits), opens ONE attempt with Begin,
// authorizes it immediately before the first byte, waits until JetStream acknowledged the
// authorized transition (the witness outside the database, docs/design.md#the-witness), sends once through the
// account's platform adapter, reads the object back, and records the outcome with Complete.
// The work item is acknowledged only after the ledger transition.
//
// Nothing here decides at-most-once on its own: the ledger's guarded statements do. What the
// dispatcher adds is the order (durable attempt and authorization before any byte, the witness
// before the send) and the send deadline: the send's context ends Margin before the in-flight
// lease, measured on this process's monotonic clock from before Authorize, so a worker paused
// past its lease writes nothing when it wakes.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// Dispatcher works the intents of ATMOST_DISPATCH. Run it once per process; any number of
// processes may share the durable consumer.
type Dispatcher struct {
	cfg      Config
	ledger   Ledger
	relay    *relay.Relay
	consumer jetstream.Consumer
	adapters *adapters.Cache
	log      *zap.Logger
	counts   *counters
	slots    chan struct{} // one per intent being worked
	taking   sync.Mutex    // held by the pipeline taking a batch (take)
	rate     sync.Mutex
	reserved map[string]int // rate tokens set aside per account, between the gate and Authorize
	reports  chan *work     // sends done, waiting for Complete
	sending  sync.WaitGroup // sends in flight
	reads    chan *read     // claimed successes, waiting for their read-back
	// underway counts the sends started whose claimed success has not reached the read loop
	// yet (and will, unless the send ends without one); outstanding, the sends started whose
	// outcomes the completion loop has not taken yet. Each loop waits, at most the linger, for
	// what its count says is on its way: a batch's sends, returning moments apart, are then
	// read back in one request and recorded in one Complete, not the first on its own and the
	// rest after it.
	underway    atomic.Int64
	outstanding atomic.Int64
	// readsDue wakes the read loop's wait when underway reaches 0 in a send that had no
	// grouped read-back to hand it (offTheReads).
	readsDue chan struct{}
	tracer   trace.Tracer
	// held is why each account's work waits, as last logged (under rate, with reserved): the
	// gate reads it so that an account held for hours is logged once, not at every redelivery.
	held map[string]string
}

// Ledger is what the dispatcher does with the ledger: read its work, fence superseded and
// unsendable intents, read the gates, and take each batch through Begin, Authorize and Complete.
// *ledger.Ledger is one.
type Ledger interface {
	GetMany(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]ledger.Intent, error)
	Superseded(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]bool, error)
	ParkSuperseded(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]bool, error)
	ParkUnsendable(ctx context.Context, key identity.DeliveryKey, why string) error
	Gates(ctx context.Context, accounts []string) (map[string]ledger.Gate, error)
	BeginMany(ctx context.Context, reqs []ledger.BeginRequest, lease time.Duration) ([]ledger.BeginResult, error)
	OwnClaims(ctx context.Context, reqs []ledger.BeginRequest) ([]ledger.Claim, error)
	AuthorizeMany(ctx context.Context, claims []ledger.Claim, inFlight time.Duration, contractVersion string) ([]ledger.AuthorizationResult, error)
	CompleteMany(ctx context.Context, reports []ledger.Report) ([]ledger.CompletionResult, error)
}

// New creates (or attaches to) the durable consumer on ATMOST_DISPATCH. The streams must exist.
func New(ctx context.Context, js jetstream.JetStream, l Ledger, rel *relay.Relay, cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	consumer, err := js.CreateOrUpdateConsumer(ctx, events.DispatchStream, jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: 4 * cfg.Concurrency,
		FilterSubject: events.DispatchSubjects,
	})
	if err != nil {
		return nil, fmt.Errorf("dispatch: consumer %s on %s: %w", cfg.Durable, events.DispatchStream, err)
	}
	return &Dispatcher{
		cfg: cfg, ledger: l, relay: rel, consumer: consumer,
		adapters: adapters.NewCache(cfg.Platforms),
		log:      cfg.Logger.Named("dispatch"),
		counts:   newCounters(),
		slots:    make(chan struct{}, cfg.Concurrency),
		reserved: map[string]int{},
		held:     map[string]string{},
		reports:  make(chan *work, cfg.Concurrency),
		reads:    make(chan *read, cfg.Concurrency),
		readsDue: make(chan struct{}, 1),
		tracer:   tracing.Or(cfg.Tracer).Tracer("github.com/atmost/atmost/internal/role/dispatch"),
	}, nil
}

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

// Run works intents until ctx ends, then stops taking work, lets every send in flight finish
// and be completed, and returns. Work taken but not started is released for redelivery.
func (d *Dispatcher) Run(ctx context.Context) error {
	// Enough buffered for every pipeline to take a full batch.
	it, err := d.consumer.Messages(append([]jetstream.PullMessagesOpt{jetstream.PullMaxMessages(max(d.cfg.Batch*d.cfg.Pipelines, 2*d.cfg.Batch))}, d.cfg.pull...)...)
	if err != nil {
		return fmt.Errorf("dispatch: consume: %w", err)
	}
	msgs := make(chan jetstream.Msg, d.cfg.Batch)
	var iterErr error
	go func() {
		defer close(msgs)
		for {
			m, err := role.Next(it, d.log)
			if err != nil {
				if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					iterErr = err
				}
				return
			}
			msgs <- m
		}
	}()
	completed := make(chan struct{})
	go func() {
		defer close(completed)
		d.completeLoop()
	}()
	readsDone := make(chan struct{})
	go func() {
		defer close(readsDone)
		d.readLoop()
	}()

	// Several pipelines take batches at once, so one batch's ledger round trips overlap
	// another's. The batch in hand is finished even when ctx ends meanwhile.
	work := context.WithoutCancel(ctx)
	var pipelines sync.WaitGroup
	for range d.cfg.Pipelines {
		pipelines.Add(1)
		go func() {
			defer pipelines.Done()
			for {
				batch := d.take(ctx, msgs)
				if len(batch) == 0 {
					return
				}
				d.dispatch(ctx, work, batch)
			}
		}()
	}
	pipelines.Wait()
	it.Drain()
	for m := range msgs {
		_ = m.Nak() // taken from the server, never started: redeliver at once
	}
	d.sending.Wait()
	close(d.reads)
	<-readsDone
	close(d.reports)
	<-completed
	if ctx.Err() == nil {
		// The consumer went away (deleted, or the connection closed for good): not a clean stop.
		return fmt.Errorf("dispatch: work stopped arriving: %w", iterErr)
	}
	return nil
}

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

// dispatch takes a batch from work items to sends in flight: every ledger step is one
// statement for the whole batch. Once stop has ended, no send starts: work not yet authorized
// is given back (an open claim simply expires, abandoned, nothing sent).
func (d *Dispatcher) dispatch(stop, ctx context.Context, msgs []jetstream.Msg) {
	batch := d.parse(msgs)
	batch = d.pending(ctx, batch)
	batch = d.fresh(ctx, batch)
	batch, unsendable := d.gate(ctx, batch)
	d.park(ctx, unsendable)
	if stop.Err() != nil {
		d.delayAll(batch, "shutdown", 0)
		return
	}
	batch = d.begin(ctx, batch)
	if len(batch) > 0 {
		d.crashPoint("after-begin")
	}
	batch = d.witnessClaims(ctx, batch)
	if stop.Err() != nil {
		d.delayAll(batch, "shutdown", d.cfg.ClaimLease)
		return
	}
	batch = d.authorize(ctx, batch)
	if len(batch) > 0 {
		d.crashPoint("after-authorize")
	}
	batch = d.witness(ctx, batch)
	if stop.Err() != nil {
		// Authorized, not sent: say so, which is the truth.
		d.notSent(batch, "shutdown", nil)
		return
	}
	d.underway.Add(int64(len(batch)))
	d.outstanding.Add(int64(len(batch)))
	for _, w := range batch {
		w.sent = true
		d.sending.Add(1)
		go d.send(w)
	}
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
		w.stop = role.KeepAlive(m, d.cfg.AckWait/3)
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

// gate checks the cheap transient gates per account, opens each account's adapter and renders
// each wire request. While a gate refuses, no attempt is created: the work waits. Work whose
// request the adapter cannot render (platform.ErrUnsendable) is returned apart, for park.
func (d *Dispatcher) gate(ctx context.Context, batch []*work) (keep, unsendable []*work) {
	if len(batch) == 0 {
		return nil, nil
	}
	var accounts []string
	seen := map[string]bool{}
	for _, w := range batch {
		if !seen[w.intent.Account] {
			seen[w.intent.Account] = true
			accounts = append(accounts, w.intent.Account)
		}
	}
	// Pipelines pass the gate one at a time: the tokens read here are shared with the batches
	// admitted earlier whose Authorize has not taken them from the bucket yet.
	d.rate.Lock()
	defer d.rate.Unlock()
	lctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
	defer cancel()
	gates, err := d.ledger.Gates(lctx, accounts)
	if err != nil {
		d.log.Warn("ledger read failed; the batch will be redelivered", zap.Error(err))
		return d.delayAll(batch, "ledger_unavailable", time.Second), nil
	}
	for _, w := range batch {
		g, ok := gates[w.intent.Account]
		if !ok {
			d.holding(w, "account_missing", nil)
			d.delay(w, "account_missing", d.cfg.GateDelay)
			continue
		}
		if refusal := g.Refusal(); refusal != "" {
			d.holding(w, string(refusal), nil)
			d.delay(w, "gated_"+string(refusal), d.cfg.GateDelay)
			continue
		}
		if ok, wait := g.Admits(d.reserved[w.intent.Account]); !ok {
			// Only as many sends as the bucket holds tokens go on to Begin; the others wait
			// for theirs, so a backlog is released at the policy's rate.
			d.delay(w, "gated_"+string(ledger.ReasonRateLimited), wait)
			continue
		}
		w.credentialVersion = g.Account.CredentialVersion
		ad, err := d.adapters.Open(g.Account)
		if err != nil {
			// A configuration the operator must fix: the work waits for it, no attempt made.
			d.holding(w, adapters.CauseAdapterUnavailable, err)
			d.delay(w, "adapter_unavailable", d.cfg.GateDelay)
			continue
		}
		d.holding(w, "", nil)
		w.adapter = ad
		if w.request, err = adapters.RequestOf(w.intent); err != nil {
			err = fmt.Errorf("%w: %w", platform.ErrUnsendable, err)
		} else {
			w.prepared, err = ad.Prepare(w.request)
		}
		if errors.Is(err, platform.ErrUnsendable) {
			// No configuration makes this request sendable: a human decides.
			w.unsendable = err
			unsendable = append(unsendable, w)
			continue
		}
		if err != nil {
			d.log.Error("cannot prepare the send; the work waits for the configuration to be fixed", zap.String("account", w.intent.Account), zap.Stringer("delivery_key", w.intent.Key), zap.Error(err))
			d.delay(w, "unpreparable", d.cfg.GateDelay)
			continue
		}
		// Last, so that nothing in this loop gives the token back while the lock is held.
		d.reserved[w.intent.Account]++
		w.reserved = true
		keep = append(keep, w)
	}
	return keep, unsendable
}

// holding logs why w's account holds its work (cause: a gate's reason, account_missing or
// adapters.CauseAdapterUnavailable with the adapter's error; "" when the account is served),
// once per account and change: a held account's work comes back every GateDelay, its log line
// does not. atmost_account_waiting_intents (the sweeper) counts the intents that wait. Called
// by gate, with rate held.
func (d *Dispatcher) holding(w *work, cause string, err error) {
	account := w.intent.Account
	state := cause
	if err != nil {
		state += ": " + err.Error()
	}
	was, logged := d.held[account]
	if state == was || (state == "" && !logged) {
		return
	}
	log := d.log.With(zap.String("account", account), zap.Stringer("delivery_key", w.intent.Key))
	switch {
	case state == "":
		delete(d.held, account)
		log.Info("account served again: its waiting work goes on", zap.String("was", was))
		return
	case cause == "account_missing":
		log.Error("intents of an account that is not configured wait; no attempt is made")
	case err != nil:
		log.Error("cannot open the account's platform adapter: its work waits, no attempt made, until the configuration is fixed (atmost accounts show, atmost accounts update)",
			zap.Error(err))
	default:
		log.Info("a gate holds the account: its work waits, no attempt made", zap.String("reason", cause))
	}
	d.held[account] = state
}

// park parks the intents whose requests the platform cannot render (request_unsendable): no
// attempt was opened and nothing was sent. An intent that moved on meanwhile is left alone.
func (d *Dispatcher) park(ctx context.Context, batch []*work) {
	var parked []*work
	for _, w := range batch {
		lctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
		err := d.ledger.ParkUnsendable(lctx, w.intent.Key, w.unsendable.Error())
		cancel()
		switch {
		case err == nil:
			d.log.Warn("request unsendable on its platform: parked for a human", zap.String("account", w.intent.Account),
				zap.Stringer("delivery_key", w.intent.Key), zap.Error(w.unsendable))
			parked = append(parked, w)
		case errors.Is(err, ledger.ErrInvalidTransition), errors.Is(err, ledger.ErrNotFound):
			d.finish(w, "not_pending")
		default:
			d.log.Warn("parking an unsendable request failed; the work comes back", zap.Stringer("delivery_key", w.intent.Key), zap.Error(err))
			d.delay(w, "ledger_unavailable", time.Second)
		}
	}
	if len(parked) == 0 {
		return
	}
	keys := make([]identity.DeliveryKey, len(parked))
	for i, w := range parked {
		keys[i] = w.intent.Key
	}
	if err := d.publishFor(ctx, keys); err != nil {
		d.log.Warn("publishing the parked intents failed; the outbox keeps them", zap.Error(err))
	}
	for _, w := range parked {
		d.finish(w, "parked_unsendable")
	}
}

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
					Detail: map[string]any{"step": "authorize", "error": err.Error()}}}
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

// publishFor publishes the transitions of keys and waits for JetStream's acknowledgements.
func (d *Dispatcher) publishFor(ctx context.Context, keys []identity.DeliveryKey) error {
	return d.retry(ctx, func() error { return d.relay.PublishFor(ctx, keys) })
}

// retry calls publish, trying again while ctx allows: a publish window momentarily full or a
// leader election is worth a second try before the work is given up.
func (d *Dispatcher) retry(ctx context.Context, publish func() error) error {
	pause := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := publish()
		if err == nil || attempt == 3 || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause *= 4
	}
}

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

// unsent is the outcome of an authorized attempt that step stopped before its first byte.
func (d *Dispatcher) unsent(step string, err error) ledger.Outcome {
	detail := map[string]any{"step": step}
	if err != nil {
		detail["error"] = err.Error()
	}
	d.counts.unsent(step)
	return ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed, Detail: detail}
}

// witness publishes the batch's transitions (the authorizations among them) and waits for
// JetStream's acknowledgements. Without them nothing is sent: the attempt is completed as not
// sent, which is the truth. Each acknowledgement of an authorized event names the stream
// sequence of the message JetStream holds; the outcome carries it to the ledger.
func (d *Dispatcher) witness(ctx context.Context, batch []*work) []*work {
	if len(batch) == 0 {
		return nil
	}
	claims := make([]ledger.Claim, len(batch))
	var written ledger.Written
	earliest := batch[0].deadline
	for i, w := range batch {
		claims[i] = w.claim
		w.addOutbox(&written, w.outbox)
		if w.deadline.Before(earliest) {
			earliest = w.deadline
		}
	}
	d.startSteps(batch, tracing.SpanWitness)
	wctx, cancel := context.WithDeadline(ctx, earliest)
	defer cancel()
	var seqs map[identity.DeliveryKey]uint64
	err := d.retry(wctx, func() (err error) {
		seqs, err = d.relay.WitnessWritten(wctx, written, claims)
		return err
	})
	if err != nil {
		d.log.Warn("the authorizations were not acknowledged by JetStream; nothing is sent", zap.Int("intents", len(batch)), zap.Error(err))
		d.notSent(batch, "witness", err)
		return nil
	}
	keep := batch[:0]
	for _, w := range batch {
		seq, ok := seqs[w.claim.Key]
		if !ok {
			d.notSent([]*work{w}, "witness", errors.New("JetStream acknowledged no authorized event of this attempt"))
			continue
		}
		w.witnessSeq = seq
		endStep(w, "acknowledged", nil)
		keep = append(keep, w)
	}
	return keep
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
	w.outcome = ledger.Outcome{Result: ledger.TransportResult(o.Result), ObjectID: o.ObjectID, Reason: ledger.Reason(o.Reason), Detail: o.Detail}
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

// offTheReads counts off underway a send that brings the read loop no read, and wakes the
// loop's wait if it was the last one on its way.
func (d *Dispatcher) offTheReads() {
	if d.underway.Add(-1) == 0 {
		select {
		case d.readsDue <- struct{}{}:
		default:
		}
	}
}

// read is one claimed success waiting for its read-back; the verdict arrives on done.
type read struct {
	w        *work
	objectID string
	deadline time.Time // the read-back budget's end
	done     chan readVerdict
}

type readVerdict struct {
	confirmed bool
	why       string
	detail    string
}

// Read-backs are grouped: the claimed successes waiting when a group starts, and those of the
// sends still on their way that arrive within the linger, go together, up to maxReadGroup,
// and readPipelines groups are read at once.
const (
	maxReadGroup  = 100
	readPipelines = 2
)

// readBack fetches the object the platform named and compares its text with the intent's,
// within the read-back budget. Where the adapter reads many objects at once it waits for the
// read loop, which reads the objects of many sends in one request; otherwise it reads alone.
func (d *Dispatcher) readBack(w *work, objectID string) (bool, string) {
	r := &read{w: w, objectID: objectID, deadline: time.Now().Add(d.cfg.ReadBackTimeout), done: make(chan readVerdict, 1)}
	if _, ok := w.adapter.(platform.ManyReader); ok {
		d.reads <- r // the read loop counts it off underway
	} else {
		d.offTheReads()
		d.readAlone(r, nil)
	}
	v := <-r.done
	if !v.confirmed {
		d.counts.readBack(v.why)
	}
	return v.confirmed, v.detail
}

// readLoop groups the read-backs (gather); it returns when reads is closed and every group it
// started has its verdicts.
func (d *Dispatcher) readLoop() {
	var groups sync.WaitGroup
	defer groups.Wait()
	slots := make(chan struct{}, readPipelines)
	for first := range d.reads {
		slots <- struct{}{} // while every pipeline reads, the next group grows
		group := gather(first, d.reads, maxReadGroup, &d.underway, d.readsDue, d.cfg.Linger, func(*read) { d.underway.Add(-1) })
		groups.Add(1)
		go func() {
			defer groups.Done()
			defer func() { <-slots }()
			d.readGroup(group)
		}()
	}
}

// readGroup reads a group, one request per adapter (each reads many objects at once). Each
// read whose grouped answer could not tell (not found yet, failed, or about another object
// than the one asked for) is read again on its own within its budget, without holding up the
// group.
func (d *Dispatcher) readGroup(group []*read) {
	byAdapter := map[platform.Adapter][]*read{}
	var apart [][]*read
	for _, r := range group {
		if !reflect.TypeOf(r.w.adapter).Comparable() {
			// An adapter value that cannot be a map key (a struct holding a map or a slice,
			// say) reads its objects in groups of one.
			apart = append(apart, []*read{r})
			continue
		}
		byAdapter[r.w.adapter] = append(byAdapter[r.w.adapter], r)
	}
	for _, reads := range byAdapter {
		apart = append(apart, reads)
	}
	var reading sync.WaitGroup
	for _, reads := range apart {
		reading.Go(func() { d.readMany(reads) })
	}
	reading.Wait()
}

// readMany reads the objects of reads, all of one adapter, with one grouped read and delivers
// each verdict, or reads alone what the grouped read could not tell.
func (d *Dispatcher) readMany(reads []*read) {
	items := make([]platform.ReadItem, len(reads))
	earliest := reads[0].deadline
	for i, r := range reads {
		items[i] = platform.ReadItem{Request: r.w.request, ObjectID: r.objectID}
		if r.deadline.Before(earliest) {
			earliest = r.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), earliest)
	defer cancel()
	// An adapter that ignored its context would hold up every read-back and the shutdown:
	// its answer is waited for only until the context ends.
	answered := make(chan []platform.ReadResult, 1)
	go func() { answered <- reads[0].w.adapter.(platform.ManyReader).ReadBackMany(ctx, items) }()
	var results []platform.ReadResult
	select {
	case results = <-answered:
	case <-ctx.Done():
	}
	if len(results) != len(items) {
		if results != nil {
			// An adapter that broke its contract: trust none of it; read each alone.
			d.log.Error("a grouped read-back answered for the wrong number of objects; reading them one by one",
				zap.Int("asked", len(items)), zap.Int("answered", len(results)))
		}
		for _, r := range reads {
			d.readAlone(r, nil)
		}
		return
	}
	for i, r := range reads {
		var v readVerdict
		var final bool
		if results[i].Err == nil && results[i].Object.ID != r.objectID {
			// An answer about another object proves nothing about this one.
			d.readAlone(r, nil)
			continue
		}
		v.confirmed, v.why, v.detail, final = adapters.Judge(r.w.request, results[i].Object, results[i].Err)
		if !final {
			d.readAlone(r, &results[i])
			continue
		}
		r.done <- v
	}
}

// readAlone reads r's object on its own, within r's budget, and delivers the verdict; first
// is the answer a grouped read already gave, if any.
func (d *Dispatcher) readAlone(r *read, first *platform.ReadResult) {
	go func() {
		ctx, cancel := context.WithDeadline(context.Background(), r.deadline)
		defer cancel()
		var v readVerdict
		if first != nil {
			v.confirmed, v.why, v.detail = adapters.ReadBackAfter(ctx, r.w.adapter, r.w.request, r.objectID, *first)
		} else {
			v.confirmed, v.why, v.detail = adapters.ReadBack(ctx, r.w.adapter, r.w.request, r.objectID)
		}
		r.done <- v
	}()
}

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

func (d *Dispatcher) delayAll(batch []*work, result string, wait time.Duration) []*work {
	for _, w := range batch {
		d.delay(w, result, wait)
	}
	return nil
}

// gather is waiting, and then, while more is on its way (coming counts it; took is called
// for each item taken, first included, and counts it off), what arrives within linger, up to
// limit in all. due, if not nil, says coming may have reached 0 without an item arriving.
func gather[T any](first T, ch <-chan T, limit int, coming *atomic.Int64, due <-chan struct{}, linger time.Duration, took func(T)) []T {
	batch := waiting(first, ch, limit)
	for _, x := range batch {
		took(x)
	}
	if len(batch) >= limit || coming.Load() <= 0 {
		return batch
	}
	t := time.NewTimer(linger)
	defer t.Stop()
	for len(batch) < limit && coming.Load() > 0 {
		select {
		case x, ok := <-ch:
			if !ok {
				return batch
			}
			took(x)
			batch = append(batch, x)
		case <-due:
		case <-t.C:
			return batch
		}
	}
	return batch
}

// waiting returns first and whatever else is already waiting on ch, up to limit in all,
// without waiting for more.
func waiting[T any](first T, ch <-chan T, limit int) []T {
	batch := []T{first}
	for len(batch) < limit {
		select {
		case v, ok := <-ch:
			if !ok {
				return batch
			}
			batch = append(batch, v)
		default:
			return batch
		}
	}
	return batch
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// crashPoint is where a test may kill or stop the process, or break something around it, to
// prove what a failure at that step leaves behind. Outside tests both hooks are nil and this
// does nothing.
func (d *Dispatcher) crashPoint(step string) {
	if crash != nil {
		crash(step)
	}
	if d.cfg.hook != nil {
		d.cfg.hook(step)
	}
}

// crash is the process-wide hook of the crash tests' subprocesses.
var crash func(step string)
