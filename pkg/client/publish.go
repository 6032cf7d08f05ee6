package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
)

// Intent is what a producer asks atmost to do once: the fields of the envelope (the contract
// is identity.ParseEnvelope's) without the version, which the client writes.
type Intent struct {
	// Account is the producer's account, 1-128 bytes without control characters; it is also
	// the subject's token.
	Account string
	// Action is the action kind, [a-z][a-z0-9_]{0,31}: "post", "reply", "like", ...
	Action string
	// Target is the stable identity of what the action is about ("" when it has none).
	Target string
	// Request is the request projection, a JSON object: a json.RawMessage or []byte is taken
	// as the JSON text it holds, anything else goes through encoding/json. It is hashed in its
	// canonical form (RFC 8785), its top-level "text" normalized.
	Request any
	// Occurrence tells deliberate repeats of the same request apart ("" for none): the same
	// Request with a new Occurrence is a new intent, and is sent again.
	Occurrence string
	// Source, when set, names the source version the intent rests on; it is not part of the
	// delivery key.
	Source *identity.Source
	// ReplyTo, when not zero, is the delivery key of the intent this one answers (a reply, the
	// next post of a thread), instead of a Target: the intent waits until that one is
	// published, then targets the object it created. It is part of the delivery key. A thread
	// is each post's ReplyTo set to the key of the post before it (docs/producers.md#replies-and-threads).
	ReplyTo identity.DeliveryKey
	// NotBefore, when not zero, is the earliest time the intent may be sent: it waits, spending
	// no attempt, and ingest refuses one more than identity.MaxScheduleAhead ahead. ExpiresAt,
	// when not zero, is when it stops being worth sending: from then on it is parked expired
	// and never sent, whatever else happens (a retry, an outage, a restore). Neither is part of
	// the delivery key: publishing the intent again with other times is the same intent, and
	// the times stored first stand.
	NotBefore, ExpiresAt time.Time
}

// Envelope validates the intent with the rules ingest applies, and returns it in canonical
// form. A refusal is an *identity.RejectError (errors.As) with the reason ingest would store;
// a Request that encoding/json cannot encode is invalid_request.
func (i Intent) Envelope() (identity.Envelope, error) {
	var request []byte
	switch r := i.Request.(type) {
	case json.RawMessage:
		request = r
	case []byte:
		request = r
	default:
		b, err := json.Marshal(r)
		if err != nil {
			return identity.Envelope{}, &identity.RejectError{Reason: identity.ReasonInvalidRequest, Detail: "request: " + err.Error()}
		}
		request = b
	}
	e, err := identity.NewEnvelope(i.Account, i.Action, i.Target, request, i.Occurrence, i.Source)
	if err != nil {
		return e, err
	}
	if !i.ReplyTo.IsZero() {
		if e, err = e.InReplyTo(i.ReplyTo); err != nil {
			return e, err
		}
	}
	if i.NotBefore.IsZero() && i.ExpiresAt.IsZero() {
		return e, nil
	}
	return e.WithSchedule(i.NotBefore, i.ExpiresAt)
}

// Receipt is JetStream's acknowledgement of one published intent. It says the message is
// stored in ATMOST_INTENTS, not yet what ingest made of it: Status and Await tell that.
type Receipt struct {
	// Key is the intent's delivery key, computed as ingest computes it.
	Key identity.DeliveryKey
	// Account is the intent's account, which Status and Await take with the key.
	Account string
	// Stream and Seq name the message in JetStream; for a duplicate, the message stored first.
	Stream string
	Seq    uint64
	// Duplicate: JetStream had stored a message with this key inside its duplicate window, and
	// stored nothing new.
	Duplicate bool
}

// ErrMaybePublished matches (errors.Is) every publish whose outcome is unknown: the message
// may be stored, or not. Publishing the same intent again (the same occurrence, so the same
// delivery key) is safe and is the remedy: the key makes a second copy a duplicate, never a
// second intent. Publishing it with a new occurrence instead may make two intents, two sends.
var ErrMaybePublished = errors.New("client: may have been published: publish the same intent again")

// MaybePublishedError is a publish whose outcome is unknown (Err says why: no acknowledgement
// in time, a disconnect, a context that ended while waiting, a write that failed part way, a
// server error from the stream). It matches ErrMaybePublished.
type MaybePublishedError struct {
	Key identity.DeliveryKey
	Err error
}

// Error names the key and the cause, and says what to do.
func (e *MaybePublishedError) Error() string {
	return fmt.Sprintf("client: %s may have been published (%v): publish the same intent again (same occurrence), the delivery key dedupes it", e.Key, e.Err)
}

// Is makes errors.Is(err, ErrMaybePublished) true.
func (e *MaybePublishedError) Is(target error) bool { return target == ErrMaybePublished }

// Unwrap returns the cause.
func (e *MaybePublishedError) Unwrap() error { return e.Err }

// Future is one asynchronous publish. Its result is known once Done is closed.
type Future struct {
	key     identity.DeliveryKey
	account string
	done    chan struct{}
	receipt Receipt
	err     error
}

// Key is the delivery key of the intent being published.
func (f *Future) Key() identity.DeliveryKey { return f.key }

// Done is closed when JetStream acknowledged the message, refused it, or its acknowledgement
// timed out (Config.AckTimeout).
func (f *Future) Done() <-chan struct{} { return f.done }

// Wait returns the receipt once Done is closed. When ctx ends first it returns a
// MaybePublishedError: the message was sent, and its acknowledgement may still come.
func (f *Future) Wait(ctx context.Context) (Receipt, error) {
	select {
	case <-f.done:
		return f.receipt, f.err
	case <-ctx.Done():
		return Receipt{Key: f.key, Account: f.account}, &MaybePublishedError{Key: f.key, Err: ctx.Err()}
	}
}

func (f *Future) resolve(r Receipt, err error) {
	f.receipt, f.err = r, err
	close(f.done)
}

// Publish validates the intent, publishes it and waits for JetStream's acknowledgement. The
// error is an *identity.RejectError for an intent ingest would refuse (nothing was sent), a
// MaybePublishedError when nothing proves the message was not stored (publish the same intent
// again), or another error when the message was certainly not stored.
func (c *Client) Publish(ctx context.Context, i Intent) (Receipt, error) {
	f, err := c.PublishAsync(ctx, i)
	if err != nil {
		return Receipt{}, err
	}
	return f.Wait(ctx)
}

// PublishAsync validates the intent and sends it without waiting for the acknowledgement,
// blocking while Config.MaxInFlight publishes are in flight. An error is a MaybePublishedError
// when the connection failed while writing the message (its bytes may have reached the server);
// any other error means nothing was sent: an *identity.RejectError, ctx ending while it waited
// for a slot, or the connection refusing the message before writing it. The outcome of what
// was sent comes through the Future.
func (c *Client) PublishAsync(ctx context.Context, i Intent) (*Future, error) {
	env, err := i.Envelope()
	if err != nil {
		return nil, err
	}
	key := env.DeliveryKey()
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("client: %s not published: %w", key, ctx.Err())
	}
	id := key.String()
	m := &nats.Msg{Subject: events.IntentSubject(env.Account), Data: env.Canonical(), Header: nats.Header{
		// The key as message id: a second publication inside the duplicate window is dropped by
		// JetStream itself, and the header lets ingest check the key the producer computed.
		jetstream.MsgIDHeader:      []string{id},
		identity.DeliveryKeyHeader: []string{id},
	}}
	f := &Future{key: key, account: env.Account, done: make(chan struct{})}
	// Registered before the publish: the acknowledgement may arrive before PublishMsgAsync
	// returns.
	c.mu.Lock()
	c.waiting[m] = f
	c.mu.Unlock()
	if _, err := c.js.PublishMsgAsync(m); err != nil {
		if c.take(m) != nil {
			<-c.slots
		}
		return nil, sendError(key, err)
	}
	return f, nil
}

// Result is the outcome of one publish of PublishAll.
type Result struct {
	Receipt Receipt
	Err     error
}

// PublishAll publishes intents with up to Config.MaxInFlight acknowledgements outstanding and
// returns one Result per intent, in order, once every one is known. Each Err is what Publish
// would have returned for that intent.
func (c *Client) PublishAll(ctx context.Context, intents []Intent) []Result {
	results := make([]Result, len(intents))
	futures := make([]*Future, len(intents))
	for n, i := range intents {
		futures[n], results[n].Err = c.PublishAsync(ctx, i)
	}
	for n, f := range futures {
		if f != nil {
			results[n].Receipt, results[n].Err = f.Wait(ctx)
		}
	}
	return results
}

// take removes m's future from the messages in flight; nil when it was resolved already.
func (c *Client) take(m *nats.Msg) *Future {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.waiting[m]
	delete(c.waiting, m)
	return f
}

// acknowledged and failed are JetStream's callbacks: they run on its acknowledgement
// goroutine, so they only resolve a future and free its slot.
func (c *Client) acknowledged(m *nats.Msg, ack *jetstream.PubAck) {
	f := c.take(m)
	if f == nil {
		return
	}
	f.resolve(Receipt{Key: f.key, Account: f.account, Stream: ack.Stream, Seq: ack.Sequence, Duplicate: ack.Duplicate}, nil)
	<-c.slots
}

func (c *Client) failed(m *nats.Msg, err error) {
	f := c.take(m)
	if f == nil {
		return
	}
	f.resolve(Receipt{Key: f.key, Account: f.account}, publishError(f.key, m.Subject, err))
	<-c.slots
}

// publishError says what a publish that got no acknowledgement proves. Only two answers prove
// that nothing of the intent was stored: JetStream's refusal of the message (refusedUnstored),
// and no stream on the subject (the server delivered the message to no one, and said so).
// Anything else (a timeout, a disconnect, a server error, an answer that does not parse) may
// follow a stored message.
func publishError(key identity.DeliveryKey, subject string, err error) error {
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api) && refusedUnstored(api):
		return fmt.Errorf("client: JetStream refused %s, nothing was stored: %w", key, err)
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return fmt.Errorf("client: %s not published: no stream takes %s (has any atmost role created its streams?): %w", key, subject, err)
	}
	return &MaybePublishedError{Key: key, Err: err}
}

// errCodeDuplicateInProcess is JetStream's "duplicate message id is in process" (409): a
// clustered stream is storing another message with this Nats-Msg-Id, which is the delivery
// key, so another copy of this very intent. nats.go names no constant for it.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

// refusedUnstored reports whether a stream's error answer proves that no copy of the intent is
// stored: a 4xx is the stream's refusal of the message before storing it (too large, a sealed
// stream, the account's limits), except the refusal that names the message id, which says a
// copy is being stored. A 5xx (a store that failed, a cluster without a leader) may follow a
// stored message, and a code outside 4xx and 5xx proves nothing.
func refusedUnstored(api *jetstream.APIError) bool {
	return api.Code >= 400 && api.Code < 500 && api.ErrorCode != errCodeDuplicateInProcess
}

// unsent are the errors of nats.go's publish that it returns before writing a byte of the
// message: a closed or draining connection, a message it cannot send, a full reconnect
// buffer, too many publishes in flight.
var unsent = []error{
	nats.ErrConnectionClosed, nats.ErrConnectionDraining, nats.ErrInvalidConnection, nats.ErrMaxPayload,
	nats.ErrBadSubject, nats.ErrHeadersNotSupported, nats.ErrReconnectBufExceeded,
	jetstream.ErrTooManyStalledMsgs, jetstream.ErrAsyncPublishReplySubjectSet,
}

// sendError says what a publish that failed while it was being sent proves. nats.go writes its
// buffer to the socket within the publish once the buffer is full, so a write error there (a
// reset, a deadline) may come after the message's bytes reached the server: only the errors
// returned before writing (unsent) prove that nothing was stored.
func sendError(key identity.DeliveryKey, err error) error {
	for _, u := range unsent {
		if errors.Is(err, u) {
			return fmt.Errorf("client: %s not published: %w", key, err)
		}
	}
	return &MaybePublishedError{Key: key, Err: err}
}
