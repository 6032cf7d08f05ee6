// Package dispatch is where bytes leave atmost. The dispatcher pool consumes work items from
// ATMOST_DISPATCH and, for each intent still pending: checks the cheap transient gates (while
// one refuses, no attempt is created and the work waits), opens ONE attempt with Begin,
// authorizes it immediately before the first byte, waits until JetStream acknowledged the
// authorized transition (the witness outside the database, DESIGN 4.5), sends once through the
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
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// Dispatcher works the intents of ATMOST_DISPATCH. Run it once per process; any number of
// processes may share the durable consumer.
type Dispatcher struct {
	cfg      Config
	ledger   *ledger.Ledger
	relay    *relay.Relay
	consumer jetstream.Consumer
	adapters *adapters
	log      *zap.Logger
	counts   *counters
	slots    chan struct{}  // one per intent being worked
	reports  chan *work     // sends done, waiting for Complete
	sending  sync.WaitGroup // sends in flight
}

// New creates (or attaches to) the durable consumer on ATMOST_DISPATCH. The streams must exist.
func New(ctx context.Context, js jetstream.JetStream, l *ledger.Ledger, rel *relay.Relay, cfg Config) (*Dispatcher, error) {
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
		adapters: newAdapters(cfg.Platforms),
		log:      cfg.Logger.Named("dispatch"),
		counts:   newCounters(),
		slots:    make(chan struct{}, cfg.Concurrency),
		reports:  make(chan *work, cfg.Concurrency),
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
	// deadline is when the send's context ends, on this process's monotonic clock.
	deadline time.Time
	outcome  ledger.Outcome
	// stop ends the InProgress keep-alive of msg.
	stop func()
}

// Run works intents until ctx ends, then stops taking work, lets every send in flight finish
// and be completed, and returns. Work taken but not started is released for redelivery.
func (d *Dispatcher) Run(ctx context.Context) error {
	it, err := d.consumer.Messages(jetstream.PullMaxMessages(d.cfg.Batch))
	if err != nil {
		return fmt.Errorf("dispatch: consume: %w", err)
	}
	msgs := make(chan jetstream.Msg)
	go func() {
		defer close(msgs)
		for {
			m, err := it.Next()
			if err != nil {
				if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					d.log.Warn("work iterator stopped", zap.Error(err))
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

	// The batch in hand is finished even when ctx ends meanwhile.
	work := context.WithoutCancel(ctx)
	for {
		batch := d.take(ctx, msgs)
		if len(batch) == 0 {
			break
		}
		d.dispatch(ctx, work, batch)
	}
	it.Stop()
	for m := range msgs {
		_ = m.Nak() // taken from the server, never started: redeliver at once
	}
	d.sending.Wait()
	close(d.reports)
	<-completed
	return nil
}

// take waits for the first work item (a free slot first), then takes whatever else is already
// waiting, up to a batch and the free slots. It returns nothing once ctx ended.
func (d *Dispatcher) take(ctx context.Context, msgs <-chan jetstream.Msg) []jetstream.Msg {
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
		default:
			<-d.slots
			return batch
		}
	}
	return batch
}

// release ends a work item's hold on its slot.
func (d *Dispatcher) release(w *work) {
	if w.stop != nil {
		w.stop()
	}
	<-d.slots
}

// finish acknowledges a work item whose intent needs nothing more from this message.
func (d *Dispatcher) finish(w *work, result string) {
	if err := w.msg.Ack(); err != nil {
		d.log.Debug("ack failed; the work item will come back and be ignored", zap.Error(err))
	}
	d.counts.work(result)
	d.release(w)
}

// delay gives a work item back to JetStream, to be delivered again after wait.
func (d *Dispatcher) delay(w *work, result string, wait time.Duration) {
	if err := w.msg.NakWithDelay(wait); err != nil {
		d.log.Debug("nak failed; the work item comes back after the ack wait", zap.Error(err))
	}
	d.counts.work(result)
	d.release(w)
}

// dispatch takes a batch from work items to sends in flight: every ledger step is one
// statement for the whole batch. Once stop has ended, no send starts: work not yet authorized
// is given back (an open claim simply expires, abandoned, nothing sent).
func (d *Dispatcher) dispatch(stop, ctx context.Context, msgs []jetstream.Msg) {
	batch := d.parse(msgs)
	batch = d.pending(ctx, batch)
	batch = d.gate(ctx, batch)
	if stop.Err() != nil {
		d.delayAll(batch, "shutdown", 0)
		return
	}
	batch = d.begin(ctx, batch)
	if len(batch) > 0 {
		crashPoint("after-begin")
	}
	if stop.Err() != nil {
		d.delayAll(batch, "shutdown", d.cfg.ClaimLease)
		return
	}
	batch = d.authorize(ctx, batch)
	if len(batch) > 0 {
		crashPoint("after-authorize")
	}
	batch = d.witness(ctx, batch)
	for _, w := range batch {
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
		item, err := events.UnmarshalWorkItem(m.Data())
		if err != nil {
			d.log.Error("unreadable work item terminated", zap.String("subject", m.Subject()), zap.Error(err))
			_ = m.TermWithReason("unreadable work item")
			d.counts.work("unreadable")
			d.release(w)
			continue
		}
		w.item = item
		if seen[item.DeliveryKey] {
			d.delay(w, "repeated", d.cfg.ClaimLease)
			continue
		}
		seen[item.DeliveryKey] = true
		w.stop = keepAlive(m, d.cfg.AckWait/3)
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
	intents, err := d.ledger.GetMany(ctx, keys)
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

// gate checks the cheap transient gates per account, opens each account's adapter and renders
// each wire request. While a gate refuses, no attempt is created: the work waits.
func (d *Dispatcher) gate(ctx context.Context, batch []*work) []*work {
	if len(batch) == 0 {
		return nil
	}
	var accounts []string
	seen := map[string]bool{}
	for _, w := range batch {
		if !seen[w.intent.Account] {
			seen[w.intent.Account] = true
			accounts = append(accounts, w.intent.Account)
		}
	}
	gates, err := d.ledger.Gates(ctx, accounts)
	if err != nil {
		d.log.Warn("ledger read failed; the batch will be redelivered", zap.Error(err))
		return d.delayAll(batch, "ledger_unavailable", time.Second)
	}
	var keep []*work
	for _, w := range batch {
		g, ok := gates[w.intent.Account]
		if !ok {
			d.log.Error("intent of an account that is not configured", zap.String("account", w.intent.Account), zap.Stringer("delivery_key", w.intent.Key))
			d.delay(w, "account_missing", d.cfg.GateDelay)
			continue
		}
		if refusal := g.Refusal(); refusal != "" {
			wait := d.cfg.GateDelay
			if refusal == ledger.ReasonRateLimited {
				wait = g.RateWait
			}
			d.delay(w, "gated_"+string(refusal), wait)
			continue
		}
		ad, err := d.adapters.open(g.Account)
		if err == nil {
			w.adapter = ad
			w.request, err = requestOf(w.intent)
		}
		if err == nil {
			w.prepared, err = ad.Prepare(w.request)
		}
		if err != nil {
			// A configuration the operator must fix: the work waits for it, no attempt made.
			d.log.Error("cannot prepare the send", zap.String("account", w.intent.Account), zap.Stringer("delivery_key", w.intent.Key), zap.Error(err))
			d.delay(w, "unsendable", d.cfg.GateDelay)
			continue
		}
		keep = append(keep, w)
	}
	return keep
}

// requestOf is the platform's view of an intent.
func requestOf(in ledger.Intent) (platform.Request, error) {
	r := platform.Request{Key: in.Key, Account: in.Account, Action: in.Action, Target: in.Target, Request: json.RawMessage(in.Request)}
	var fields struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal([]byte(in.Request), &fields); err != nil {
		return r, fmt.Errorf("intent %s: request: %w", in.Key, err)
	}
	if fields.Text != nil {
		r.Text = identity.NormalizeText(*fields.Text)
	}
	return r, nil
}

// begin opens one attempt per intent, binding the prepared request's hash to it.
func (d *Dispatcher) begin(ctx context.Context, batch []*work) []*work {
	if len(batch) == 0 {
		return nil
	}
	reqs := make([]ledger.BeginRequest, len(batch))
	for i, w := range batch {
		reqs[i] = ledger.BeginRequest{Key: w.intent.Key, RequestHash: w.prepared.Hash}
	}
	results, err := d.ledger.BeginMany(ctx, reqs, d.cfg.ClaimLease)
	if err != nil {
		d.log.Warn("begin failed; the batch will be redelivered", zap.Error(err))
		return d.delayAll(batch, "ledger_unavailable", time.Second)
	}
	var keep []*work
	for i, w := range batch {
		r := results[i]
		switch {
		case r.Err == nil:
			w.claim = r.Claim
			keep = append(keep, w)
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
		start := time.Now() // monotonic: the lease cannot have started before this
		results, err := d.ledger.AuthorizeMany(ctx, claims, d.cfg.InFlightLease, contract)
		if err != nil {
			// Unknown whether it committed: nothing is sent either way. An authorization that
			// did commit expires into indeterminate, which is honest: the ledger cannot tell.
			d.log.Warn("authorize failed; nothing sent, the batch will be redelivered", zap.Error(err))
			d.delayAll(group, "ledger_unavailable", time.Second)
			continue
		}
		deadline := start.Add(d.cfg.InFlightLease - d.cfg.Margin)
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
				w.deadline = deadline
				keep = append(keep, w)
			}
		}
	}
	return keep
}

// witness publishes the batch's transitions (the authorizations among them) and waits for
// JetStream's acknowledgements. Without them nothing is sent: the attempt is completed as not
// sent, which is the truth.
func (d *Dispatcher) witness(ctx context.Context, batch []*work) []*work {
	if len(batch) == 0 {
		return nil
	}
	keys := make([]identity.DeliveryKey, len(batch))
	earliest := batch[0].deadline
	for i, w := range batch {
		keys[i] = w.intent.Key
		if w.deadline.Before(earliest) {
			earliest = w.deadline
		}
	}
	wctx, cancel := context.WithDeadline(ctx, earliest)
	defer cancel()
	if err := d.relay.PublishFor(wctx, keys); err != nil {
		d.log.Warn("the authorizations were not acknowledged by JetStream; nothing is sent", zap.Int("intents", len(batch)), zap.Error(err))
		for _, w := range batch {
			w.outcome = ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed,
				Detail: map[string]any{"step": "witness", "error": err.Error()}}
			d.counts.send("witness_failed")
			d.sending.Add(1)
			d.reports <- w
			d.sending.Done()
		}
		return nil
	}
	return batch
}

// send makes the one send of an authorized attempt, reads back a claimed success, and hands
// the outcome to the completer.
func (d *Dispatcher) send(w *work) {
	defer d.sending.Done()
	if !time.Now().Before(w.deadline) {
		w.outcome = ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed,
			Detail: map[string]any{"step": "deadline", "error": "the send deadline passed before the first byte"}}
		d.counts.send("deadline")
		d.reports <- w
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), minTime(w.deadline, time.Now().Add(d.cfg.SendTimeout)))
	started := time.Now()
	o := w.adapter.Send(ctx, w.prepared)
	cancel()
	d.counts.sendDuration(time.Since(started))
	crashPoint("after-send")
	w.outcome = ledger.Outcome{Result: ledger.TransportResult(o.Result), ObjectID: o.ObjectID, Reason: ledger.Reason(o.Reason), Detail: o.Detail}
	d.counts.send(string(o.Result))
	if o.Result == platform.Sent {
		confirmed, detail := d.readBack(w, o.ObjectID)
		w.outcome.Confirmed = confirmed
		if w.outcome.Detail == nil {
			w.outcome.Detail = map[string]any{}
		}
		w.outcome.Detail["read_back"] = detail
	}
	d.reports <- w
}

// readBack fetches the object the platform named and compares its text with the intent's.
// Reads are safe to repeat, so a read that could not tell is tried again within the budget.
func (d *Dispatcher) readBack(w *work, objectID string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.ReadBackTimeout)
	defer cancel()
	pause := 50 * time.Millisecond
	for {
		obj, err := w.adapter.ReadBack(ctx, w.request, objectID)
		switch {
		case err == nil && identity.SameText(obj.Text, w.request.Text):
			return true, "confirmed"
		case err == nil:
			d.counts.readBack("mismatch")
			return false, "text differs"
		case errors.Is(err, platform.ErrNotFound):
			d.counts.readBack("missing")
			return false, "object not found"
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			d.counts.readBack("unavailable")
			return false, "read-back unavailable: " + err.Error()
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// completeLoop records outcomes in batches: whatever arrived while the previous batch was
// being written goes into the next one.
func (d *Dispatcher) completeLoop() {
	for first := range d.reports {
		batch := []*work{first}
	more:
		for len(batch) < d.cfg.Batch {
			select {
			case w, ok := <-d.reports:
				if !ok {
					break more
				}
				batch = append(batch, w)
			default:
				break more
			}
		}
		d.complete(batch)
	}
}

// complete records a batch of outcomes, retrying while the ledger is unreachable (an outcome
// is evidence and is worth keeping even after the lease expired), then publishes the
// transitions and acknowledges the work.
func (d *Dispatcher) complete(batch []*work) {
	reports := make([]ledger.Report, len(batch))
	for i, w := range batch {
		reports[i] = ledger.Report{Claim: w.claim, Outcome: w.outcome}
	}
	var results []ledger.CompletionResult
	pause := 100 * time.Millisecond
	giveUp := time.Now().Add(d.cfg.InFlightLease + time.Minute)
	for {
		var err error
		results, err = d.ledger.CompleteMany(context.Background(), reports)
		if err == nil {
			break
		}
		if time.Now().After(giveUp) {
			d.log.Error("outcomes could not be recorded; the intents become indeterminate by lease expiry", zap.Int("intents", len(batch)), zap.Error(err))
			for _, w := range batch {
				d.delay(w, "complete_failed", d.cfg.ClaimLease)
			}
			return
		}
		d.log.Warn("complete failed; retrying", zap.Error(err), zap.Duration("in", pause))
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Second)
	}
	crashPoint("after-complete")
	keys := make([]identity.DeliveryKey, len(batch))
	for i, w := range batch {
		keys[i] = w.intent.Key
	}
	if err := d.relay.PublishFor(context.Background(), keys); err != nil {
		d.log.Warn("publishing completions failed; the relay loop will", zap.Error(err))
	}
	for i, w := range batch {
		r := results[i]
		if r.Err != nil {
			// Fenced: the lease expired first; the outcome is kept as evidence.
			d.log.Warn("completion fenced out; kept as evidence", zap.Stringer("delivery_key", w.intent.Key), zap.Error(r.Err))
			d.counts.completion("fenced")
		} else {
			d.counts.completion(string(r.Completion.State))
			d.log.Debug("completed", zap.Stringer("delivery_key", w.intent.Key), zap.String("state", string(r.Completion.State)),
				zap.String("reason", string(r.Completion.Reason)), zap.Int64("generation", w.claim.Generation), zap.Int64("epoch", w.claim.Epoch))
		}
		d.finish(w, "completed")
	}
}

func (d *Dispatcher) delayAll(batch []*work, result string, wait time.Duration) []*work {
	for _, w := range batch {
		d.delay(w, result, wait)
	}
	return nil
}

// keepAlive tells JetStream every interval that msg is still being worked, until stop.
func keepAlive(msg jetstream.Msg, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// crashPoint is where a test's subprocess may kill or stop itself, to prove what a crash at
// that step leaves behind. Outside tests crash is nil and this does nothing.
func crashPoint(step string) {
	if crash != nil {
		crash(step)
	}
}

var crash func(step string)
