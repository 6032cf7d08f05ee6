// Package ingest moves producers' intents from ATMOST_INTENTS into the ledger. The queue
// delivers at least once; the ledger's delivery key makes a redelivery or a re-publish a no-op
// (counted as a duplicate), never a second intent. A message is acknowledged only after what it
// carries is committed: a valid intent in the ledger, or bad input in the rejects table and on
// atmost.rejected.<reason>. When the ledger is unreachable the batch is nak'ed with a delay:
// nothing is lost, and the server redelivers it for as long as it takes. No message can hold
// back the rest of its batch: one the database refuses is tried alone, nak'ed alone, and on its
// MaxDeliveries-th delivery recorded as unstorable by its size and digest, and acknowledged.
package ingest

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// DefaultLinger is Config.Linger's default.
const DefaultLinger = 10 * time.Millisecond

// Config tunes an Ingester. The zero value of every field means its default.
type Config struct {
	// Durable is the name of the pull consumer on ATMOST_INTENTS. Default "ingest".
	Durable string
	// Batch is how many messages one fetch asks for; their valid intents go to the ledger in
	// one Submit. Default DefaultBatch.
	Batch int
	// MaxWait bounds how long an idle fetch waits for the first message; a fetch never waits
	// for a batch to fill. Default DefaultMaxWait.
	MaxWait time.Duration
	// Linger is how long after the previous batch a fetch that has less than a batch waits
	// for more: a steady load is taken in batches of what arrived over one Linger, which
	// share the ledger's cost per batch, and no intent waits for its batch much longer than
	// a Linger. The first intent after a quiet spell longer than a Linger is taken at once.
	// Default DefaultLinger; negative means none.
	Linger time.Duration
	// NakDelay is how long JetStream waits before redelivering a message the ledger could not
	// take. Default DefaultNakDelay.
	NakDelay time.Duration
	// AckWait is the consumer's redelivery timeout. Default DefaultAckWait.
	AckWait time.Duration
	// MaxDeliveries is the delivery on which a message the database refused every time (a data
	// error, never an outage) is recorded as unstorable and acknowledged. Default
	// DefaultMaxDeliveries.
	MaxDeliveries int
	// Logger; nil means no logging.
	Logger *zap.Logger
	// Tracer makes the store span of each message, continuing the trace its headers carry;
	// nil means the no-op provider.
	Tracer trace.TracerProvider
}

// The defaults of the configuration's fields (the zero value of a field means its default).
const (
	DefaultBatch    = 100
	DefaultMaxWait  = time.Second
	DefaultNakDelay = 5 * time.Second
	DefaultAckWait  = 30 * time.Second
)

func (c Config) withDefaults() Config {
	if c.Durable == "" {
		c.Durable = "ingest"
	}
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.MaxWait = cmp.Or(c.MaxWait, DefaultMaxWait)
	switch {
	case c.Linger == 0:
		c.Linger = DefaultLinger
	case c.Linger < 0:
		c.Linger = 0
	}
	c.NakDelay = cmp.Or(c.NakDelay, DefaultNakDelay)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	c.MaxDeliveries = cmp.Or(c.MaxDeliveries, DefaultMaxDeliveries)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// DefaultMaxDeliveries: a refusal is data the database will refuse again, so the bound only
// allows for one that would not be; with the default nak delay it costs a message the database
// never takes about 20 seconds before its record.
const DefaultMaxDeliveries = 5

// Stats counts what one batch did: each message is one of created, duplicate, rejected (stored
// with its reason), unstorable (recorded by its digest) or retried (nak'ed for redelivery).
type Stats struct {
	Created, Duplicates, Rejected, Unstorable, Retried int
}

// Ingester consumes ATMOST_INTENTS into the ledger.
type Ingester struct {
	js       jetstream.JetStream
	ledger   Ledger
	consumer jetstream.Consumer
	pull     *puller
	cfg      Config
	log      *zap.Logger
	tracer   trace.Tracer
}

// Ledger is what ingest does with the ledger: store intents, with the traceparents of their
// store spans, and rejects. *ledger.Ledger is one.
type Ledger interface {
	SubmitTraced(ctx context.Context, intents []identity.Envelope, traceparents []string) ([]ledger.SubmitResult, error)
	Reject(ctx context.Context, rs []ledger.Rejection) (int64, error)
}

// New creates (or attaches to) the durable consumer and returns an Ingester. The streams must
// exist (internal/streams). The consumer has no MaxDeliver: the server would stop delivering a
// message at its bound without telling anyone, where the ingester ends it with a record.
func New(ctx context.Context, js jetstream.JetStream, l Ledger, cfg Config) (*Ingester, error) {
	cfg = cfg.withDefaults()
	consumer, err := js.CreateOrUpdateConsumer(ctx, events.IntentsStream, jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1,
		MaxAckPending: 10 * cfg.Batch,
		FilterSubject: events.IntentSubjects,
	})
	if err != nil {
		return nil, fmt.Errorf("ingest: consumer %s on %s: %w", cfg.Durable, events.IntentsStream, err)
	}
	return &Ingester{js: js, ledger: l, consumer: consumer, pull: newPuller(js, events.IntentsStream, cfg.Durable),
		cfg: cfg, log: cfg.Logger.Named("ingest"), tracer: tracing.Or(cfg.Tracer).Tracer("github.com/atmost/atmost/internal/role/ingest")}, nil
}

// Close gives back at once (NAK), for another ingester, what the server delivered to this one
// that no batch took yet, and ends the subscription its fetches are answered on. The role calls
// it when it stops fetching.
func (in *Ingester) Close() error { return in.pull.close() }

// message is one fetched message and what became of it.
type message struct {
	msg       *nats.Msg
	seq       uint64
	delivered uint64            // this delivery's number, from 1
	envelope  identity.Envelope // a valid envelope, even when reject refuses the message
	reject    *ledger.Rejection
	stored    bool   // its intent or its reject is committed
	refused   error  // the database refused its content on this delivery
	outcome   string // created or duplicate, for its store span
	// span is its store span; traceparent that span's context, stored with its intent.
	span        trace.Span
	traceparent string
}

// Batch fetches up to Config.Batch messages and ingests them. It returns what it did; an error
// means some messages were nak'ed for redelivery because the ledger or JetStream failed.
func (in *Ingester) Batch(ctx context.Context) (Stats, error) {
	stats, _, err := in.BatchWritten(ctx)
	return stats, err
}

// BatchWritten is Batch, and also returns what the outbox holds, once the batch's Submit
// committed, of the batch's stored intents: those it created, and those it found stored
// already (a redelivery, perhaps of a batch whose ingester died between its commit and its
// publishing). They are the caller's to publish right after the commit
// (relay.Relay.PublishWritten); other writers' outbox rows are left to their own writers.
func (in *Ingester) BatchWritten(ctx context.Context) (Stats, ledger.Written, error) {
	var stats Stats
	var written ledger.Written
	fetched, err := in.pull.fetch(ctx, in.cfg.Batch, in.cfg.MaxWait, in.cfg.Linger)
	if err != nil && len(fetched) == 0 {
		return stats, written, fmt.Errorf("ingest: fetch: %w", err)
	}
	if len(fetched) == 0 {
		return stats, written, nil
	}
	batch := make([]*message, len(fetched))
	for i, msg := range fetched {
		batch[i] = classify(msg)
		in.startSpan(ctx, batch[i])
	}
	defer endSpans(batch)

	// Valid intents: one Submit, or one each when the database refuses the batch.
	var valid []*message
	for _, m := range batch {
		if m.reject == nil {
			valid = append(valid, m)
		}
	}
	if err := in.submit(ctx, valid, &stats, &written); err != nil {
		in.nak(without(batch, storedIntents(batch)))
		in.ack(storedIntents(batch))
		stats.Retried = len(batch) - len(storedIntents(batch))
		return stats, written, fmt.Errorf("ingest: submit: %w", err)
	}

	crashPoint("after-commit")

	// Bad input, then the messages the database refused on their last allowed delivery, as
	// intents or as rejects: stored, published, then acknowledged.
	var rejected, last []*message
	for _, m := range batch {
		if m.reject != nil {
			rejected = append(rejected, m)
		}
	}
	err = in.storeRejects(ctx, rejected)
	if err == nil {
		for _, m := range batch {
			if m.refused != nil && m.delivered >= uint64(in.cfg.MaxDeliveries) {
				m.reject, m.refused = in.unstorable(m), nil
				last = append(last, m)
			}
		}
		err = in.storeRejects(ctx, last)
	}
	if err != nil {
		in.nak(without(batch, storedIntents(batch)))
		in.ack(storedIntents(batch))
		stats.Retried = len(batch) - len(storedIntents(batch))
		return stats, written, fmt.Errorf("ingest: store rejects: %w", err)
	}
	rejected = nil
	for _, m := range stored(batch) {
		if m.reject != nil {
			rejected = append(rejected, m)
		}
	}
	if err := in.publishRejects(ctx, rejected); err != nil {
		in.nak(without(batch, storedIntents(batch)))
		in.ack(storedIntents(batch))
		stats.Retried = len(batch) - len(storedIntents(batch))
		return stats, written, err
	}
	for _, m := range rejected {
		if m.reject.Reason == string(identity.ReasonUnstorable) {
			stats.Unstorable++
			in.log.Error("message recorded as unstorable", zap.Uint64("seq", m.seq), zap.Uint64("delivery", m.delivered), zap.String("detail", m.reject.Detail))
		} else {
			stats.Rejected++
		}
	}

	// What the database refused below the bound comes back alone after the nak delay.
	done := stored(batch)
	for _, m := range without(batch, done) {
		in.log.Warn("the ledger refused a message; it will be redelivered", zap.Uint64("seq", m.seq),
			zap.Uint64("delivery", m.delivered), zap.Int("max_deliveries", in.cfg.MaxDeliveries), zap.Error(m.refused))
	}
	in.nak(without(batch, done))
	stats.Retried = len(batch) - len(done)
	in.ack(done)
	return stats, written, nil
}

// submit stores the intents of ms in one Submit. When the database refuses the batch for its
// content, each intent is submitted alone, so that only the one it refuses is held back (its
// refused is set). An error means the ledger is unavailable; the intents it stored before are
// marked stored.
func (in *Ingester) submit(ctx context.Context, ms []*message, stats *Stats, written *ledger.Written) error {
	if len(ms) == 0 {
		return nil
	}
	envelopes := make([]identity.Envelope, len(ms))
	traceparents := make([]string, len(ms))
	for i, m := range ms {
		envelopes[i], traceparents[i] = m.envelope, m.traceparent
	}
	results, err := in.ledger.SubmitTraced(ctx, envelopes, traceparents)
	switch {
	case err == nil:
	case ledger.Permanent(err) && len(ms) > 1:
		for _, m := range ms {
			if err := in.submit(ctx, []*message{m}, stats, written); err != nil {
				return err
			}
		}
		return nil
	case ledger.Permanent(err):
		ms[0].refused = err
		return nil
	default:
		return err
	}
	for i, r := range results {
		m := ms[i]
		switch r.Outcome {
		case ledger.Created:
			stats.Created++
			written.Add(r.Key, r.Outbox)
			m.stored, m.outcome = true, string(ledger.Created)
		case ledger.Duplicate:
			stats.Duplicates++
			written.Add(r.Key, r.Outbox)
			m.stored, m.outcome = true, string(ledger.Duplicate)
		case ledger.UnknownAccount:
			refusal := ledger.UnknownAccountRefusal(m.envelope.Account)
			m.reject = rejection(m, refusal.Reason, refusal.Detail)
		}
	}
	return nil
}

// storeRejects stores the rejections of ms in one transaction, or one each when the database
// refuses the batch for its content, and marks what it stored; a refused one has its refused
// set. An error means the ledger is unavailable.
func (in *Ingester) storeRejects(ctx context.Context, ms []*message) error {
	if len(ms) == 0 {
		return nil
	}
	rs := make([]ledger.Rejection, len(ms))
	for i, m := range ms {
		rs[i] = *m.reject
	}
	_, err := in.ledger.Reject(ctx, rs)
	switch {
	case err == nil:
		for _, m := range ms {
			m.stored = true
		}
		return nil
	case ledger.Permanent(err) && len(ms) > 1:
		for _, m := range ms {
			if err := in.storeRejects(ctx, []*message{m}); err != nil {
				return err
			}
		}
		return nil
	case ledger.Permanent(err):
		// Not even the record of an unstorable message was taken: it stays unacknowledged.
		ms[0].refused = err
		return nil
	default:
		return err
	}
}

// unstorable is the record of a message the database refused on its last allowed delivery:
// only what is known for certain to be storable (the stream, the sequence, the body's size and
// SHA-256, and the refusal in ASCII), none of the message's own text.
func (in *Ingester) unstorable(m *message) *ledger.Rejection {
	refusal := m.refused.Error()
	if len(refusal) > 300 {
		refusal = refusal[:300]
	}
	detail := fmt.Sprintf("the ledger refused this message on %d deliveries (the bound); its %d bytes are not kept: %s",
		m.delivered, len(m.msg.Data), strconv.QuoteToASCII(refusal))
	return &ledger.Rejection{Reason: string(identity.ReasonUnstorable), Detail: detail, Stream: events.IntentsStream,
		StreamSeq: int64(m.seq), Raw: m.msg.Data, DigestOnly: true}
}

// classify parses one message: an envelope, or the reason it is refused.
func classify(msg *nats.Msg) *message {
	m := &message{msg: msg}
	var stored time.Time
	if meta, err := msg.Metadata(); err == nil {
		m.seq, m.delivered, stored = meta.Sequence.Stream, meta.NumDelivered, meta.Timestamp
	}
	// The client hands over a header block it cannot parse as no headers at all; only the
	// message's size still tells that one came.
	if block := msg.Size() - len(msg.Subject) - len(msg.Reply) - len(msg.Data); block > 0 && msg.Header == nil {
		m.reject = rejection(m, identity.ReasonInvalidHeader, fmt.Sprintf("the NATS header block (%d bytes) does not parse; it is not kept", block))
		return m
	}
	env, refusal := Parse(msg.Subject, msg.Header, msg.Data)
	if refusal == nil && !stored.IsZero() {
		// not_before is bounded against the time JetStream stored the message, so that a
		// redelivery or a replay decides as the first delivery did.
		if rej := new(identity.RejectError); errors.As(env.CheckSchedule(stored), &rej) {
			refusal = rej
		}
	}
	if env.Account != "" {
		// Valid, if perhaps refused for its subject or header: its reject names the account
		// and the key.
		m.envelope = env
	}
	if refusal != nil {
		m.reject = rejection(m, refusal.Reason, refusal.Detail)
	}
	return m
}

// Parse is ingest's verdict on one message before the ledger is asked: the envelope its body
// holds, or why it is refused (the envelope's own rules, then the subject that must be its
// account's, then every value of the delivery-key header). env is the envelope whenever the body
// is a valid one, also when its subject or header refuses it. Ingest parses every message it
// fetches with it, and atmost rejects replay parses a stored reject with it again, so a replay
// refuses exactly what ingest refuses.
func Parse(subject string, header nats.Header, body []byte) (env identity.Envelope, refusal *identity.RejectError) {
	env, err := identity.ParseEnvelope(body)
	if answer := answerHeader(header); answer != "" {
		// Whatever its body, it is an answer to a request, not an intent: named as what it
		// is, never as the malformed JSON it would otherwise be taken for.
		return env, &identity.RejectError{Reason: identity.ReasonMisdirectedReply,
			Detail: fmt.Sprintf("%s: an answer to a request that named this subject as its reply, not a producer's message", answer)}
	}
	if err == nil {
		err = checkSubject(env, subject)
	}
	// Every value of the header is checked, not only the first: each one a producer stated
	// must be the key.
	for _, stated := range header.Values(identity.DeliveryKeyHeader) {
		if err == nil {
			err = identity.CheckDeliveryKeyHeader(env, stated)
		}
	}
	var rej *identity.RejectError
	switch {
	case err == nil:
		return env, nil
	case errors.As(err, &rej):
		return env, rej
	default:
		return env, &identity.RejectError{Reason: identity.ReasonMalformedJSON, Detail: err.Error()}
	}
}

// startSpan starts m's store span, continuing the trace its headers carry (a new one when
// they carry none and the provider samples it): the intent is stored with its context, which
// every later step of the intent continues.
func (in *Ingester) startSpan(ctx context.Context, m *message) {
	ctx, m.span = in.tracer.Start(tracecontext.Extract(ctx, m.msg.Header), tracing.SpanStore, trace.WithSpanKind(trace.SpanKindConsumer))
	m.traceparent = tracecontext.TraceParent(ctx)
	if m.span.IsRecording() {
		m.span.SetAttributes(tracing.System.String("nats"), tracing.Subject.String(m.msg.Subject))
		if m.envelope.Account != "" {
			m.span.SetAttributes(tracing.DeliveryKey.String(m.envelope.DeliveryKey().String()), tracing.Account.String(m.envelope.Account))
		}
	}
}

// endSpans ends the store spans of a batch with what became of each message: created or
// duplicate, its reject reason, or retried (nak'ed for redelivery).
func endSpans(batch []*message) {
	for _, m := range batch {
		if !m.span.IsRecording() {
			continue
		}
		switch {
		case m.reject != nil && m.stored:
			m.span.SetAttributes(tracing.Outcome.String("rejected"), tracing.Reason.String(m.reject.Reason))
			m.span.SetStatus(codes.Error, m.reject.Reason+": "+m.reject.Detail)
		case m.stored:
			m.span.SetAttributes(tracing.Outcome.String(m.outcome))
		default:
			m.span.SetAttributes(tracing.Outcome.String("retried"))
			if m.refused != nil {
				m.span.RecordError(m.refused)
			}
		}
		m.span.End()
	}
}

// answerHeader names the header that marks a message as an answer to a request, "" when it
// carries none: a service's error, the pending counts of a pull request's end (408, 409), the
// last sequences of a heartbeat or a flow control (100), or a status. Such an answer lands on an
// intent subject only because a request named that subject as its reply, and no producer
// means it as an intent. JetStream stores the message without its status line, so the headers
// the server writes beside it are what tells it apart; an answer that is only a status line
// (no responders, a pull request's 404) is stored empty, and refused as malformed_json.
func answerHeader(h nats.Header) string {
	for _, name := range answerHeaders {
		if vs := h.Values(name); len(vs) > 0 {
			return fmt.Sprintf("%s %s", name, quoteShort(vs[0]))
		}
	}
	return ""
}

// answerHeaders are written by the server or by a service (nats.go's micro) on an answer, never
// on a message a client publishes; the client library exports only the service's name.
var answerHeaders = []string{micro.ErrorCodeHeader, "Nats-Pending-Messages", "Nats-Pending-Bytes",
	"Nats-Last-Consumer", "Nats-Last-Stream", "Status"}

// checkSubject refuses an envelope that came on a subject other than its account's. NATS
// permissions restrict subjects, not envelopes, so only this comparison keeps a producer that
// may publish on atmost.intent.acct-b alone from creating intents for acct-a. The subject is
// compared whole: an account token never holds '.', so a longer subject names no account.
func checkSubject(env identity.Envelope, subject string) error {
	want := events.IntentSubject(env.Account)
	if subject == want {
		return nil
	}
	return &identity.RejectError{Reason: identity.ReasonSubjectMismatch,
		Detail: fmt.Sprintf("account %s is published on %s; this message came on %s", quote(env.Account), want, quoteShort(subject))}
}

// quoteShort quotes at most the first 64 bytes of s, so a detail never carries a long subject
// (the rejection keeps the subject whole).
func quoteShort(s string) string {
	const max = 64
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:max]) + "..."
}

func rejection(m *message, reason identity.Reason, detail string) *ledger.Rejection {
	return &ledger.Rejection{
		Reason: string(reason), Detail: detail, Subject: m.msg.Subject, Stream: events.IntentsStream,
		StreamSeq: int64(m.seq), Headers: m.msg.Header, Raw: m.msg.Data,
	}
}

// publishRejects puts each refused message on atmost.rejected.<reason>: an events.Reject
// naming the original message by its stream sequence and Nats-Msg-Id, with the reason's
// detail and the original bytes (bounded; none for an unstorable one). The reject's own
// Nats-Msg-Id derives from the original's sequence, so a redelivery publishes nothing new. The
// Atmost-* headers repeat the reason, detail, subject, size and SHA-256 for tools that show
// headers; the payload is the contract (reject.schema.json).
func (in *Ingester) publishRejects(ctx context.Context, rejected []*message) error {
	var futures []jetstream.PubAckFuture
	for _, m := range rejected {
		payload, err := rejectPayload(m)
		if err != nil {
			return fmt.Errorf("ingest: publish reject: %w", err)
		}
		f, err := in.js.PublishMsgAsync(&nats.Msg{
			Subject: events.RejectSubject(identity.Reason(m.reject.Reason)),
			Data:    payload,
			Header: nats.Header{
				jetstream.MsgIDHeader: []string{events.RejectID(m.reject.Stream, uint64(m.reject.StreamSeq))},
				"Atmost-Reason":       []string{m.reject.Reason},
				"Atmost-Detail":       []string{m.reject.Detail},
				"Atmost-Subject":      []string{m.reject.Subject},
				"Atmost-Size":         []string{strconv.Itoa(len(m.reject.Raw))},
				"Atmost-Sha256":       []string{fmt.Sprintf("%x", sha256.Sum256(m.reject.Raw))},
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

// rejectPayload is the events.Reject of a refused message. Its subject and message id come
// from the message itself, also for an unstorable one, whose ledger record keeps neither: on
// the stream they are JSON (as stored text), which cannot be refused, and they are how its
// producer finds it.
func rejectPayload(m *message) ([]byte, error) {
	raw := m.reject.Raw
	switch {
	case m.reject.DigestOnly:
		raw = nil
	case len(raw) > ledger.MaxRejectRaw:
		raw = raw[:ledger.MaxRejectRaw]
	}
	sum := sha256.Sum256(m.reject.Raw)
	r := events.Reject{
		V: events.RejectVersion, ID: events.RejectID(m.reject.Stream, uint64(m.reject.StreamSeq)),
		Reason: identity.Reason(m.reject.Reason), Detail: ledger.StoredText(m.reject.Detail),
		Stream: m.reject.Stream, StreamSeq: uint64(m.reject.StreamSeq),
		Subject: ledger.StoredText(m.msg.Subject), MsgID: ledger.StoredText(m.msg.Header.Get(jetstream.MsgIDHeader)),
		Size: len(m.reject.Raw), SHA256: hex.EncodeToString(sum[:]), Raw: raw, Truncated: len(raw) < len(m.reject.Raw),
	}
	if m.envelope.Account != "" {
		key := m.envelope.DeliveryKey()
		r.Account, r.DeliveryKey = m.envelope.Account, &key
	}
	return r.Marshal()
}

// ack acknowledges a committed batch, without waiting for the server to confirm it (as the
// dispatcher and the reconciler acknowledge): an acknowledgement lost on its way only has the
// message delivered again, which the ledger answers as a duplicate (Stats.Duplicates) and
// ingest acknowledges then. Waiting cost every batch a round trip before its publication, and
// JetStream a reply per message.
func (in *Ingester) ack(ms []*message) {
	for _, m := range ms {
		if err := in.pull.ack(m.msg); err != nil {
			// The commit stands; a redelivery is a duplicate, which the ledger absorbs.
			in.log.Debug("ack not sent", zap.Uint64("seq", m.seq), zap.Error(err))
		}
	}
}

func (in *Ingester) nak(ms []*message) {
	for _, m := range ms {
		_ = in.pull.nak(m.msg, in.cfg.NakDelay)
	}
}

// storedIntents are the messages of ms whose intent is committed: acknowledged even when the
// rest of their batch is not. A stored reject waits for its publishing.
func storedIntents(ms []*message) []*message {
	var out []*message
	for _, m := range stored(ms) {
		if m.reject == nil {
			out = append(out, m)
		}
	}
	return out
}

func stored(ms []*message) []*message {
	var out []*message
	for _, m := range ms {
		if m.stored {
			out = append(out, m)
		}
	}
	return out
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
