// Package ingest moves producers' intents from ATMOST_INTENTS into the ledger. The queue
// delivers at least once; the ledger's delivery key makes a redelivery or a re-publish a no-op
// (counted as a duplicate), never a second intent. A message is acknowledged only after what it
// carries is committed: a valid intent in the ledger, or bad input in the rejects table and on
// atmost.rejected.<reason>. When the ledger is unreachable the batch is nak'ed with a delay:
// nothing is lost. A bad message never blocks the rest of its batch.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// Config tunes an Ingester. The zero value of every field means its default.
type Config struct {
	// Durable is the name of the pull consumer on ATMOST_INTENTS. Default "ingest".
	Durable string
	// Batch is how many messages one fetch asks for; their valid intents go to the ledger in
	// one Submit. Default 100.
	Batch int
	// MaxWait bounds how long a fetch waits for a full batch. Default 1 s.
	MaxWait time.Duration
	// NakDelay is how long JetStream waits before redelivering a batch the ledger could not
	// take. Default 5 s.
	NakDelay time.Duration
	// AckWait is the consumer's redelivery timeout. Default 30 s.
	AckWait time.Duration
	// Logger; nil means no logging.
	Logger *zap.Logger
}

func (c Config) withDefaults() Config {
	if c.Durable == "" {
		c.Durable = "ingest"
	}
	if c.Batch == 0 {
		c.Batch = 100
	}
	if c.MaxWait == 0 {
		c.MaxWait = time.Second
	}
	if c.NakDelay == 0 {
		c.NakDelay = 5 * time.Second
	}
	if c.AckWait == 0 {
		c.AckWait = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Stats counts what one batch did.
type Stats struct {
	Created, Duplicates, Rejected, Retried int
}

// Ingester consumes ATMOST_INTENTS into the ledger.
type Ingester struct {
	js       jetstream.JetStream
	ledger   *ledger.Ledger
	consumer jetstream.Consumer
	cfg      Config
	log      *zap.Logger
}

// New creates (or attaches to) the durable consumer and returns an Ingester. The streams must
// exist (internal/streams).
func New(ctx context.Context, js jetstream.JetStream, l *ledger.Ledger, cfg Config) (*Ingester, error) {
	cfg = cfg.withDefaults()
	consumer, err := js.CreateOrUpdateConsumer(ctx, events.IntentsStream, jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: 10 * cfg.Batch,
		FilterSubject: events.IntentSubjects,
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: consumer %s on %s: %w", cfg.Durable, events.IntentsStream, err)
	}
	return &Ingester{js: js, ledger: l, consumer: consumer, cfg: cfg, log: cfg.Logger.Named("ingest")}, nil
}

// message is one fetched message and what became of it.
type message struct {
	msg      jetstream.Msg
	seq      uint64
	envelope identity.Envelope
	reject   *ledger.Rejection
}

// Batch fetches up to Config.Batch messages and ingests them. It returns what it did; an error
// means some messages were nak'ed for redelivery.
func (in *Ingester) Batch(ctx context.Context) (Stats, error) {
	stats, _, err := in.BatchKeys(ctx)
	return stats, err
}

// BatchKeys is Batch, and also returns the delivery keys of the batch's stored intents: those
// it created, and those it found stored already (a redelivery, perhaps of a batch whose
// ingester died between its commit and its publishing). Their transitions are the caller's to
// publish right after the commit (relay.PublishFor); other writers' outbox rows are left to
// their own writers.
func (in *Ingester) BatchKeys(ctx context.Context) (Stats, []identity.DeliveryKey, error) {
	var stats Stats
	var keys []identity.DeliveryKey
	fetched, err := in.consumer.Fetch(in.cfg.Batch, jetstream.FetchMaxWait(in.cfg.MaxWait))
	if err != nil {
		return stats, keys, fmt.Errorf("ingest: fetch: %w", err)
	}
	var batch []*message
	for msg := range fetched.Messages() {
		batch = append(batch, classify(msg))
	}
	if err := fetched.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && len(batch) == 0 {
		return stats, keys, fmt.Errorf("ingest: fetch: %w", err)
	}
	if len(batch) == 0 {
		return stats, keys, nil
	}

	// Valid intents: one Submit. Unknown accounts become rejections.
	var valid []*message
	var envelopes []identity.Envelope
	for _, m := range batch {
		if m.reject == nil {
			valid = append(valid, m)
			envelopes = append(envelopes, m.envelope)
		}
	}
	if len(envelopes) > 0 {
		results, err := in.ledger.Submit(ctx, envelopes)
		if err != nil {
			in.nak(batch)
			stats.Retried = len(batch)
			return stats, keys, fmt.Errorf("ingest: submit: %w", err)
		}
		for i, r := range results {
			switch r.Outcome {
			case ledger.Created:
				stats.Created++
				keys = append(keys, r.Key)
			case ledger.Duplicate:
				stats.Duplicates++
				keys = append(keys, r.Key)
			case ledger.UnknownAccount:
				valid[i].reject = rejection(valid[i].msg, valid[i].seq, identity.ReasonUnknownAccount, "account "+quote(valid[i].envelope.Account)+" is not configured")
			}
		}
	}

	crashPoint("after-commit")

	// Bad input: stored, published, then acknowledged.
	var rejects []ledger.Rejection
	var rejected []*message
	for _, m := range batch {
		if m.reject != nil {
			rejects = append(rejects, *m.reject)
			rejected = append(rejected, m)
		}
	}
	if len(rejects) > 0 {
		if _, err := in.ledger.Reject(ctx, rejects); err != nil {
			in.nak(rejected)
			in.ack(ctx, without(batch, rejected))
			stats.Retried = len(rejected)
			return stats, keys, fmt.Errorf("ingest: store rejects: %w", err)
		}
		if err := in.publishRejects(ctx, rejected); err != nil {
			in.nak(rejected)
			in.ack(ctx, without(batch, rejected))
			stats.Retried = len(rejected)
			return stats, keys, err
		}
		stats.Rejected = len(rejected)
	}
	in.ack(ctx, batch)
	return stats, keys, nil
}

// classify parses one message: an envelope, or the reason it is refused.
func classify(msg jetstream.Msg) *message {
	m := &message{msg: msg}
	if meta, err := msg.Metadata(); err == nil {
		m.seq = meta.Sequence.Stream
	}
	env, err := identity.ParseEnvelope(msg.Data())
	if err == nil {
		err = identity.CheckDeliveryKeyHeader(env, msg.Headers().Get(identity.DeliveryKeyHeader))
	}
	var rej *identity.RejectError
	switch {
	case err == nil:
		m.envelope = env
	case errors.As(err, &rej):
		m.reject = rejection(msg, m.seq, rej.Reason, rej.Detail)
	default:
		m.reject = rejection(msg, m.seq, identity.ReasonMalformedJSON, err.Error())
	}
	return m
}

func rejection(msg jetstream.Msg, seq uint64, reason identity.Reason, detail string) *ledger.Rejection {
	return &ledger.Rejection{
		Reason: string(reason), Detail: detail, Subject: msg.Subject(), Stream: events.IntentsStream,
		StreamSeq: int64(seq), Headers: msg.Headers(), Raw: msg.Data(),
	}
}

// publishRejects puts each refused message on atmost.rejected.<reason>, with its reason and
// detail as headers and the original bytes (bounded) as payload; Nats-Msg-Id names the
// original message, so a redelivery publishes nothing new.
func (in *Ingester) publishRejects(ctx context.Context, rejected []*message) error {
	var futures []jetstream.PubAckFuture
	for _, m := range rejected {
		raw := m.reject.Raw
		if len(raw) > ledger.MaxRejectRaw {
			raw = raw[:ledger.MaxRejectRaw]
		}
		f, err := in.js.PublishMsgAsync(&nats.Msg{
			Subject: events.RejectSubject(identity.Reason(m.reject.Reason)),
			Data:    raw,
			Header: nats.Header{
				jetstream.MsgIDHeader: []string{fmt.Sprintf("reject:%s:%d", m.reject.Stream, m.reject.StreamSeq)},
				"Atmost-Reason":       []string{m.reject.Reason},
				"Atmost-Detail":       []string{m.reject.Detail},
				"Atmost-Subject":      []string{m.reject.Subject},
			},
		})
		if err != nil {
			return fmt.Errorf("ingest: publish reject: %w", err)
		}
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("ingest: publish reject: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Second):
			return errors.New("ingest: publish reject: no acknowledgement within 10s")
		}
	}
	return nil
}

// ack acknowledges a committed batch. DoubleAck waits for the server's confirmation; the
// confirmations of a batch are awaited together (up to ackers at once), not one round trip
// after another.
func (in *Ingester) ack(ctx context.Context, ms []*message) {
	const ackers = 32
	var wg sync.WaitGroup
	next := make(chan *message)
	for range min(ackers, len(ms)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range next {
				if err := m.msg.DoubleAck(ctx); err != nil {
					// The commit stands; a redelivery is a duplicate, which the ledger absorbs.
					in.log.Debug("ack not confirmed", zap.Uint64("seq", m.seq), zap.Error(err))
				}
			}
		}()
	}
	for _, m := range ms {
		next <- m
	}
	close(next)
	wg.Wait()
}

func (in *Ingester) nak(ms []*message) {
	for _, m := range ms {
		_ = m.msg.NakWithDelay(in.cfg.NakDelay)
	}
}

func without(all, some []*message) []*message {
	skip := map[*message]bool{}
	for _, m := range some {
		skip[m] = true
	}
	var out []*message
	for _, m := range all {
		if !skip[m] {
			out = append(out, m)
		}
	}
	return out
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

// crashPoint is where a test's subprocess may kill itself, to prove what a crash at that step
// leaves behind. Outside tests crash is nil and this does nothing.
func crashPoint(step string) {
	if crash != nil {
		crash(step)
	}
}

var crash func(step string)
