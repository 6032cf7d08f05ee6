// Package relay publishes the ledger's outbox: every transition becomes an event on
// ATMOST_EVENTS (Nats-Msg-Id = its stable id), and every transition into pending also a work
// item on ATMOST_DISPATCH, as does an intent's publication (or its end parked or failed) for
// each reply that waits for it (envelope reply_to). A row leaves the outbox only after JetStream acknowledged what it
// stands for; a crash in between publishes it again, with the same id, which JetStream drops
// inside its duplicate window and consumers drop by id beyond it.
package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// Outbox is the part of the ledger the relay reads and clears.
type Outbox interface {
	Unpublished(ctx context.Context, max int, settled time.Duration) ([]ledger.Unpublished, error)
	UnpublishedFor(ctx context.Context, keys []identity.DeliveryKey) ([]ledger.Unpublished, error)
	WitnessFor(ctx context.Context, claims []ledger.Claim) ([]ledger.Unpublished, error)
	Published(ctx context.Context, done []ledger.Unpublished) ([]ledger.Unpublished, error)
	ForgetLater(ctx context.Context, done []ledger.Unpublished, removed func([]ledger.Unpublished)) error
	WaitingReplies(ctx context.Context, parents []identity.DeliveryKey) ([]ledger.WaitingReply, error)
}

// Config tunes a Relay. The zero value of every field means its default.
type Config struct {
	// Batch is how many outbox rows one round publishes. Default DefaultBatch.
	Batch int
	// Interval is the pause between rounds of Run when the outbox is empty. Default
	// DefaultInterval.
	Interval time.Duration
	// Settle is how long a row stays its writer's to publish: Run and DrainSettled take only
	// rows older than that. Every writer publishes its own rows right after its commit and
	// removes them once acknowledged, so a younger row is almost always on its way already;
	// taken by the loop as well, it was published twice (JetStream drops the copy, but both
	// cost a round trip and a delete, and the two deletes wait for each other). A row a writer
	// left behind (it crashed, or JetStream failed it) is published by the loop Settle to
	// Settle plus Interval after its commit. Default DefaultSettle; negative means 0.
	Settle time.Duration
	// AckTimeout bounds the wait for JetStream's acknowledgements of one round. Default DefaultAckTimeout.
	AckTimeout time.Duration
	// RemoveLater leaves the removal of the rows a writer's own publication (PublishFor,
	// Witness, AfterCommit) got acknowledged to that writer's next write transaction
	// (ledger.Ledger.ForgetLater), for a process that writes again within moments: the
	// dispatcher and ingest. The loop's rounds (Drain) still remove theirs at once.
	RemoveLater bool
	// Logger; nil means no logging.
	Logger *zap.Logger
}

// DefaultInterval is the relay's pause between rounds, for Config and the roles' flag.
const DefaultInterval = time.Second

// DefaultSettle is Config.Settle's default: longer than a writer takes from its commit to the
// removal of what it published, under load too (ledger.ForgetDelay after the acknowledgement
// at most).
const DefaultSettle = 2 * time.Second

// The defaults of Config's fields (the zero value of a field means its default), which the
// role's flags show too.
const (
	DefaultBatch      = 500
	DefaultAckTimeout = 10 * time.Second
)

func (c Config) withDefaults() Config {
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	switch {
	case c.Settle == 0:
		c.Settle = DefaultSettle
	case c.Settle < 0:
		c.Settle = 0
	}
	c.AckTimeout = cmp.Or(c.AckTimeout, DefaultAckTimeout)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Relay moves outbox rows to JetStream. It is safe for concurrent use.
type Relay struct {
	outbox    Outbox
	js        jetstream.JetStream
	cfg       Config
	log       *zap.Logger
	published atomic.Uint64
	draining  sync.Mutex
	// transitions counts what this relay published and removed from the outbox, by the state
	// each transition led to and its reason.
	transitions *prometheus.CounterVec
}

// Published returns how many transitions this relay published and removed from the outbox.
func (r *Relay) Published() uint64 { return r.published.Load() }

// New returns a relay from outbox to js.
func New(outbox Outbox, js jetstream.JetStream, cfg Config) *Relay {
	cfg = cfg.withDefaults()
	return &Relay{outbox: outbox, js: js, cfg: cfg, log: cfg.Logger.Named("relay"),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_transitions_total",
			Help: "Transitions this process published to ATMOST_EVENTS and removed from the outbox, by the state they led to and their reason."},
			[]string{"to", "reason"})}
}

// Collectors are the relay's metrics, for a role's registry.
func (r *Relay) Collectors() []prometheus.Collector { return []prometheus.Collector{r.transitions} }

// Event is the event a transition publishes.
func Event(u ledger.Unpublished) events.Event {
	return events.Event{
		V: events.Version, ID: events.NewID(u.Key, u.Seq), DeliveryKey: u.Key, Seq: u.Seq, Account: u.Account,
		From: u.From, To: u.To, Reason: u.Reason, Attempt: u.Token,
		Epoch: u.Epoch, Generation: u.Generation, Actor: u.Actor, At: u.At,
	}
}

// Drain publishes rounds until the outbox is empty and returns how many transitions it
// published. A round whose acknowledgements do not all arrive leaves the unacknowledged rows
// in the outbox and ends Drain with the error: they are published again next time.
func (r *Relay) Drain(ctx context.Context) (int, error) { return r.drain(ctx, 0) }

// DrainSettled is Drain of the rows older than Config.Settle: those no writer is publishing
// any more. The slow paths (Run, the sweeper's pass) call it.
func (r *Relay) DrainSettled(ctx context.Context) (int, error) { return r.drain(ctx, r.cfg.Settle) }

func (r *Relay) drain(ctx context.Context, settled time.Duration) (int, error) {
	// One drain at a time per relay: two would read and publish the same rows twice
	// (harmless, deduplicated by id, but wasted).
	r.draining.Lock()
	defer r.draining.Unlock()
	total := 0
	for {
		batch, err := r.outbox.Unpublished(ctx, r.cfg.Batch, settled)
		if err != nil || len(batch) == 0 {
			return total, err
		}
		acks, err := r.round(ctx, batch, false, false)
		total += len(acks)
		if err != nil {
			return total, err
		}
	}
}

// PublishFor publishes the outbox transitions of the given intents, right after the writer's
// own commit, and returns nil only when every transition of theirs that was in the outbox is
// acknowledged by JetStream and removed. A transition already gone from the outbox was
// acknowledged earlier (rows leave only after their acknowledgement), so a nil return
// witnesses that JetStream holds every transition of these intents committed before the call.
func (r *Relay) PublishFor(ctx context.Context, keys []identity.DeliveryKey) error {
	if len(keys) == 0 {
		return nil
	}
	rows, err := r.outbox.UnpublishedFor(ctx, keys)
	if err != nil || len(rows) == 0 {
		return err
	}
	_, err = r.round(ctx, rows, r.cfg.RemoveLater, true)
	return err
}

// PublishWritten is PublishFor for a writer whose writes named what they left in the outbox
// (the hot writes' ledger.Outboxed), so that only the intents whose rows they could not all
// name are read back: it publishes them all and returns nil only when JetStream acknowledged
// every one, which witnesses, as PublishFor's nil does, that JetStream holds every transition
// of these intents committed before their writes.
func (r *Relay) PublishWritten(ctx context.Context, w ledger.Written) error {
	_, err := r.publishWritten(ctx, w)
	return err
}

func (r *Relay) publishWritten(ctx context.Context, w ledger.Written) ([]acked, error) {
	rows := w.Rows
	if len(w.Unread) > 0 {
		more, err := r.outbox.UnpublishedFor(ctx, w.Unread)
		if err != nil {
			return nil, err
		}
		rows = append(slices.Clip(rows), w.Unacknowledged(more)...)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return r.round(ctx, rows, r.cfg.RemoveLater, true)
}

// AfterWrite is AfterCommit for a writer whose writes named what they left in the outbox
// (PublishWritten).
func (r *Relay) AfterWrite(ctx context.Context, w ledger.Written) error {
	err := r.PublishWritten(ctx, w)
	if err != nil {
		r.log.Warn("publishing transitions after their commit failed; the outbox keeps them for the relay loop", zap.Int("transitions", len(w.Rows)), zap.Int("intents read back", len(w.Unread)), zap.Error(err))
	}
	return err
}

// AfterCommit is how every writer publishes the transitions its own commit just made: at once,
// not a relay interval later. A failure leaves them in the outbox, where Run (the slow path)
// publishes them, so it is logged and returned for the writer to count, never a reason to undo
// or redo the write. A writer that must know its transitions are on the stream before it goes
// on waits on PublishFor (the dispatcher's fence and claims) or Witness (its authorizations).
func (r *Relay) AfterCommit(ctx context.Context, keys []identity.DeliveryKey) error {
	err := r.PublishFor(ctx, keys)
	if err != nil {
		r.log.Warn("publishing transitions after their commit failed; the outbox keeps them for the relay loop", zap.Int("intents", len(keys)), zap.Error(err))
	}
	return err
}

// Witness is PublishFor for the dispatcher's witness of claims' authorizations: it publishes
// the outbox transitions of their intents and, whether or not a relay round published it
// already, each claim's authorized event, and returns nil only when JetStream acknowledged
// every one of them. With it, by key, the stream sequence JetStream named in its
// acknowledgement of each claim's authorized event: for a duplicate, that of the copy it
// already held. Only this acknowledgement, which the send waits for, proves a message stored
// before the send; a copy stored later (a relay's publish flushed after the duplicate window)
// proves nothing of the kind.
func (r *Relay) Witness(ctx context.Context, claims []ledger.Claim) (map[identity.DeliveryKey]uint64, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	rows, err := r.outbox.WitnessFor(ctx, claims)
	if err != nil {
		return nil, err
	}
	acks, err := r.round(ctx, rows, r.cfg.RemoveLater, true)
	if err != nil {
		return nil, err
	}
	return witnessSeqs(acks, claims), nil
}

// WitnessWritten is Witness for the dispatcher, whose Authorize named what it left in the
// outbox of the claims' intents (ledger.AuthorizationResult's Outbox), each claim's authorized
// transition among it: it publishes them and returns, by key, the stream sequence JetStream
// named in its acknowledgement of each claim's authorized event, once every one is
// acknowledged.
// The intents whose rows Authorize could not name are read as Witness reads them (WitnessFor),
// their authorized transitions also when a relay round already removed them.
func (r *Relay) WitnessWritten(ctx context.Context, w ledger.Written, claims []ledger.Claim) (map[identity.DeliveryKey]uint64, error) {
	rows := w.Rows
	if len(w.Unread) > 0 {
		var unread []ledger.Claim
		for _, c := range claims {
			if slices.Contains(w.Unread, c.Key) {
				unread = append(unread, c)
			}
		}
		more, err := r.outbox.WitnessFor(ctx, unread)
		if err != nil {
			return nil, err
		}
		rows = append(slices.Clip(rows), w.Unacknowledged(more)...)
	}
	acks, err := r.round(ctx, rows, r.cfg.RemoveLater, true)
	if err != nil {
		return nil, err
	}
	return witnessSeqs(acks, claims), nil
}

// witnessSeqs are the stream sequences of the claims' authorized events among acks, by key.
func witnessSeqs(acks []acked, claims []ledger.Claim) map[identity.DeliveryKey]uint64 {
	tokens := make(map[identity.DeliveryKey]identity.AttemptToken, len(claims))
	for _, c := range claims {
		tokens[c.Key] = c.Token
	}
	seqs := make(map[identity.DeliveryKey]uint64, len(claims))
	for _, a := range acks {
		u := a.row
		if token, ok := tokens[u.Key]; ok && u.To == ledger.Authorized && u.Token != nil && *u.Token == token {
			seqs[u.Key] = a.ack.Sequence
		}
	}
	return seqs
}

// acked is a row whose every message JetStream acknowledged, with the acknowledgement of its
// event.
type acked struct {
	row ledger.Unpublished
	ack *jetstream.PubAck
}

// round publishes rows, removes the acknowledged ones from the outbox (a row the outbox no
// longer holds is no error; later: with the writer's next transaction, ledger.ForgetLater)
// and counts those the removal took: a row that two rounds publish at once (this relay's
// writer path and its loop, or two processes) is counted once, by the round whose delete took
// it. A delete whose commit succeeded but whose answer was lost counts nothing: the counters
// may fall short, never over. It returns the acknowledged rows. Whole says rows hold every
// transition the outbox held of their intents (publish).
func (r *Relay) round(ctx context.Context, rows []ledger.Unpublished, later, whole bool) ([]acked, error) {
	acks, err := r.publish(ctx, rows, whole)
	done := make([]ledger.Unpublished, len(acks))
	for i, a := range acks {
		done[i] = a.row
	}
	if wakeErr := r.wakeReplies(ctx, done); wakeErr != nil {
		// The rows stay in the outbox: the next round publishes them, and wakes the replies.
		return nil, wakeErr
	}
	if later {
		if clearErr := r.outbox.ForgetLater(ctx, done, r.count); clearErr != nil {
			return nil, clearErr
		}
		return acks, err
	}
	removed, clearErr := r.outbox.Published(ctx, done)
	if clearErr != nil {
		return nil, clearErr
	}
	r.count(removed)
	return acks, err
}

// wakeReplies publishes a work item for every reply that waits for an intent whose publication,
// or whose end without one (parked, failed), is among done: what brings a waiting reply back to
// a dispatcher, which sends it or parks it dependency_unmet. Called before done leaves the
// outbox, so a crash in between wakes them again (JetStream drops the copy by its id).
func (r *Relay) wakeReplies(ctx context.Context, done []ledger.Unpublished) error {
	var parents []identity.DeliveryKey
	event := map[identity.DeliveryKey]events.ID{}
	for _, u := range done {
		if u.To == ledger.Published || u.To == ledger.Parked || u.To == ledger.Failed {
			if _, seen := event[u.Key]; !seen {
				parents = append(parents, u.Key)
			}
			event[u.Key] = events.NewID(u.Key, u.Seq)
		}
	}
	if len(parents) == 0 {
		return nil
	}
	replies, err := r.outbox.WaitingReplies(ctx, parents)
	if err != nil || len(replies) == 0 {
		return err
	}
	futures := make([]jetstream.PubAckFuture, 0, len(replies))
	for _, reply := range replies {
		w := events.WorkItem{V: events.Version, DeliveryKey: reply.Key, Account: reply.Account, Event: events.NewID(reply.Key, reply.Seq)}
		f, err := r.js.PublishMsgAsync(&nats.Msg{Subject: w.Subject(), Data: w.Marshal(), Header: headers(w.ReplyMsgID(event[reply.Parent]), reply.TraceParent)})
		if err != nil {
			return fmt.Errorf("relay: waking %d replies: %w", len(replies), err)
		}
		futures = append(futures, f)
	}
	timeout := time.NewTimer(r.cfg.AckTimeout)
	defer timeout.Stop()
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("relay: waking %d replies: %w", len(replies), err)
		case <-timeout.C:
			return fmt.Errorf("relay: waking %d replies: acknowledgements did not arrive within %s", len(replies), r.cfg.AckTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.log.Debug("replies woken by their parent's end", zap.Int("replies", len(replies)))
	return nil
}

// count counts transitions a removal took from the outbox.
func (r *Relay) count(removed []ledger.Unpublished) {
	for _, u := range removed {
		r.transitions.WithLabelValues(string(u.To), string(u.Reason)).Inc()
	}
	r.published.Add(uint64(len(removed)))
}

// Run drains the outbox's settled rows every Interval until ctx ends: the slow path that
// catches whatever the writers' own publishing after commit missed.
func (r *Relay) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if n, err := r.DrainSettled(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("relay round failed; the rows stay in the outbox", zap.Int("published", n), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// headers are the headers of a transition's messages: the message id JetStream deduplicates
// on and, when the intent was stored with one, its traceparent, by which the dispatcher (from
// the work item) and the events' consumers continue the intent's trace.
func headers(msgID, traceparent string) nats.Header {
	h := nats.Header{jetstream.MsgIDHeader: []string{msgID}}
	if traceparent != "" {
		h[tracecontext.Header] = []string{traceparent}
	}
	return h
}

// publish sends the events (and work items) of batch and returns the rows whose every message
// JetStream acknowledged. A duplicate acknowledgement is success: the message is in the stream.
//
// A work item asks the dispatcher pool to take a pending intent. A transition into pending
// with a later one of the same intent in the batch has left pending already (taken by a
// dispatcher: Begin finds a submission still in the outbox, whose work item did not follow
// its event, and names it with its claim), so its work item is not sent: it would ask for
// what is done, and cost a publish and its acknowledgement per intent. Its event is sent, as
// every transition's is.
//
// Where whole (batch holds every transition the outbox held of its intents, as a writer's
// publication reads them), a work item goes out only once JetStream acknowledged every event
// of its intent in the batch, and says so (events.WorkItem.Follows): the dispatcher that takes
// it publishes none of them again. A round of the slow path takes a batch of the oldest rows,
// which may end inside an intent's, and sends its work items with the events, promising
// nothing.
func (r *Relay) publish(ctx context.Context, batch []ledger.Unpublished, whole bool) ([]acked, error) {
	type pending struct {
		row   ledger.Unpublished
		event jetstream.PubAckFuture
		ack   *jetstream.PubAck // the event's, once acknowledged
		work  *nats.Msg         // its work item, until it is sent (whole)
		sent  jetstream.PubAckFuture
	}
	latest := make(map[identity.DeliveryKey]int64, len(batch))
	unanswered := make(map[identity.DeliveryKey]int, len(batch))
	for _, u := range batch {
		latest[u.Key] = max(latest[u.Key], u.Seq)
		unanswered[u.Key]++ // rows not sent (a publish refused) never answer
	}
	sent := make([]pending, 0, len(batch))
	for _, u := range batch {
		e := Event(u)
		payload, err := e.Marshal()
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", e.ID, err)
		}
		p := pending{row: u}
		if p.event, err = r.js.PublishMsgAsync(&nats.Msg{Subject: e.Subject(), Data: payload, Header: headers(string(e.ID), u.TraceParent)}); err != nil {
			break // what was sent so far is still awaited below
		}
		if u.Dispatch && u.Seq == latest[u.Key] {
			w := events.WorkItem{V: events.Version, DeliveryKey: u.Key, Account: u.Account, Event: e.ID, Follows: whole}
			p.work = &nats.Msg{Subject: w.Subject(), Data: w.Marshal(), Header: headers(w.MsgID(), u.TraceParent)}
			if !whole {
				if p.sent, err = r.js.PublishMsgAsync(p.work); err != nil {
					break
				}
				p.work = nil
			}
		}
		sent = append(sent, p)
	}
	timeout := time.NewTimer(r.cfg.AckTimeout)
	defer timeout.Stop()
	var out []acked
	var failures []error
	await := func(f jetstream.PubAckFuture) (*jetstream.PubAck, error) {
		select {
		case ack := <-f.Ok():
			return ack, nil
		case err := <-f.Err():
			failures = append(failures, err)
			return nil, nil
		case <-timeout.C:
			return nil, fmt.Errorf("relay: acknowledgements did not arrive within %s", r.cfg.AckTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// The events; where whole, an intent's work item goes out as soon as JetStream answered
	// for every event of its intent in the batch and acknowledged them all, so that the work
	// items follow the events one by one rather than the whole batch's. Then the work items'
	// acknowledgements.
	workOf := map[identity.DeliveryKey]*pending{}
	for i := range sent {
		if sent[i].work != nil {
			workOf[sent[i].row.Key] = &sent[i]
		}
	}
	failed := map[identity.DeliveryKey]bool{}
	sending := true
	for i := range sent {
		p := &sent[i]
		ack, err := await(p.event)
		if err != nil {
			return out, err
		}
		p.ack = ack
		if ack == nil {
			failed[p.row.Key] = true
		} else if p.work == nil && p.sent == nil {
			out = append(out, acked{row: p.row, ack: ack})
		}
		key := p.row.Key
		if unanswered[key]--; unanswered[key] > 0 || failed[key] || workOf[key] == nil || !sending {
			continue
		}
		w := workOf[key]
		if w.sent, err = r.js.PublishMsgAsync(w.work); err != nil {
			failures = append(failures, err)
			sending = false // the rest of the work items wait for the slow path
		}
	}
	for _, p := range sent {
		if p.sent == nil {
			continue
		}
		ack, err := await(p.sent)
		if err != nil {
			return out, err
		}
		if ack != nil && p.ack != nil {
			out = append(out, acked{row: p.row, ack: p.ack})
		}
	}
	if len(out) < len(batch) {
		return out, fmt.Errorf("relay: %d of %d transitions not acknowledged: %w", len(batch)-len(out), len(batch), errors.Join(failures...))
	}
	return out, nil
}
