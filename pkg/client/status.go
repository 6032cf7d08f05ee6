package client

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
)

// The outcome service's protocol, which the ingest role serves (internal/outcome) and Status
// speaks. Any NATS client can speak it: a request on StatusSubject(account) whose body is a
// StatusRequest; the reply is an Outcome, or an error in the headers of nats.go's micro
// framework (Nats-Service-Error-Code, one of the codes below, and Nats-Service-Error).
const (
	// StatusService is the service's name, as `nats micro ls` lists it.
	StatusService = "atmost-status"
	// StatusVersion is the version of the protocol (micro's service version): a change a
	// client of this one cannot read gets a new major version.
	StatusVersion = "1.0.0"
	// StatusSubjects is the subject filter the service listens on, one token per account.
	StatusSubjects = "atmost.status.*"

	// CodeBadRequest: the subject's token is not an account token, or the body is not a
	// StatusRequest.
	CodeBadRequest = "400"
	// CodeNotFound: the ledger holds no intent with this key for this account.
	CodeNotFound = "404"
	// CodeUnavailable: the service could not read the ledger; ask again.
	CodeUnavailable = "503"
)

// StatusSubject is where the outcome of account's intents is asked for.
func StatusSubject(account string) string {
	return "atmost.status." + identity.AccountToken(account)
}

// StatusRequest is the body of a request to the outcome service.
type StatusRequest struct {
	Key identity.DeliveryKey `json:"delivery_key"`
	// Seq, when not 0, is the sequence in ATMOST_INTENTS of the message that carried the intent
	// (Receipt.Seq): when the ledger holds no such intent, the service looks for ingest's
	// refusal of that message, which counts only if the message was on the account's subject
	// with the key in its Atmost-Delivery-Key header (as the client publishes). With Key zero,
	// Seq alone asks for the intent of that message: the service derives its key, and the
	// Outcome's Key tells it to a producer that did not compute it.
	Seq uint64 `json:"seq,omitempty"`
}

// Outcome is what the ledger holds of one intent, as the outcome service read it.
type Outcome struct {
	Key     identity.DeliveryKey `json:"delivery_key"`
	Account string               `json:"account"`
	// State is one of the six: pending, authorized, published, failed, indeterminate, parked.
	// State, Reason, Retry, Seq and UpdatedAt describe a stored intent: a refusal (Rejected)
	// has none, and its JSON leaves them out rather than carry zero values.
	State atmosttype.State `json:"state,omitempty"`
	// Reason says why it is in its state (the reasons table of docs/design.md).
	Reason atmosttype.Reason `json:"reason,omitempty"`
	// Retry is what may follow the reason: progress, done, yes, by policy (retried when the
	// account's policy lists it), never (an unknown outcome, reconciled by one lookup) or human.
	Retry atmosttype.Retryability `json:"retry,omitempty"`
	// Seq is the number of the intent's latest transition, the seq of its latest event.
	Seq int64 `json:"seq,omitzero"`
	// ObjectID is the platform's id of what was created, once published.
	ObjectID  string    `json:"object_id,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Rejected is set, and State empty, when no intent was stored because ingest refused the
	// message that carried it (asked for with Seq): nothing will be sent.
	Rejected *Rejection `json:"rejected,omitempty"`
}

// Rejection is ingest's refusal of the message that carried an intent: the reason (from
// identity.AllReasons, such as unknown_account), its detail, and, when an operator can fix the
// cause, how the refused message is then stored after all (Remedy). It is an error, so that a
// producer can return it as it is.
type Rejection struct {
	Reason identity.Reason `json:"reason"`
	Detail string          `json:"detail"`
	Remedy string          `json:"remedy,omitempty"`
}

func (r *Rejection) Error() string {
	msg := fmt.Sprintf("ingest refused the message: %s: %s", r.Reason, r.Detail)
	if r.Remedy != "" {
		msg += "; " + r.Remedy
	}
	return msg
}

// Remedy says how a message refused for reason is stored once an operator has fixed the cause,
// "" for a reason only its producer can fix. Publishing it again is no remedy: inside
// JetStream's duplicate window the copy is dropped and the same refusal is read back, so the
// stored message is replayed instead.
func Remedy(reason identity.Reason, account string) string {
	if reason != identity.ReasonUnknownAccount {
		return ""
	}
	return fmt.Sprintf("an operator can fix this: once the account is added (atmost accounts add %s ...), "+
		"`atmost rejects replay --account %s` stores this message as its intent, and Status and Await answer with it "+
		"(publishing it again does not: JetStream drops the copy as a duplicate of the refused message)", shellWord(account), shellWord(account))
}

// shellWord quotes s for a POSIX shell when it needs it, so that a remedy can be pasted.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Settled reports whether the intent reached a state that answers a producer: published
// (sent, and read back), failed (proven not sent; Retry says whether a retry may follow),
// parked (a person decides), or never stored because ingest refused its message (Rejected).
// Pending, authorized and indeterminate intents are still moving.
func (o Outcome) Settled() bool {
	return o.State == atmosttype.Published || o.State == atmosttype.Failed || o.State == atmosttype.Parked || o.Rejected != nil
}

var (
	// ErrNotFound: the ledger holds no such intent of that account. Shortly after a publish it
	// means ingest has not stored it yet; later, that ingest refused the message (its reject
	// is in the ledger) or that it was never published. It never proves that nothing will be
	// sent: a producer that wants the intent publishes the same intent again (same occurrence),
	// never a new occurrence, which would be a second intent if the first is still on its way.
	ErrNotFound = errors.New("client: no such intent in the ledger")
	// ErrNoStatusService: nothing answers on the status subject (no ingest role serves it, or
	// this connection may not request it).
	ErrNoStatusService = errors.New("client: no outcome service answers")
)

// Status asks the outcome service what became of the intent of account with key (Seq names
// the message that carried it, so that a refusal of it is an outcome too). It fails with
// ErrNotFound, ErrNoStatusService, or the service's or the connection's error; none of them
// changes anything, so asking again is always safe.
func (c *Client) Status(ctx context.Context, account string, key identity.DeliveryKey, opts ...Option) (Outcome, error) {
	body, err := json.Marshal(StatusRequest{Key: key, Seq: options(opts).seq})
	if err != nil {
		return Outcome{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StatusTimeout)
	defer cancel()
	reply, err := c.nc.RequestWithContext(ctx, StatusSubject(account), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return Outcome{}, fmt.Errorf("%w on %s", ErrNoStatusService, StatusSubject(account))
	case err != nil:
		return Outcome{}, fmt.Errorf("client: status of %s: %w", key, err)
	}
	switch code := reply.Header.Get("Nats-Service-Error-Code"); code {
	case "":
	case CodeNotFound:
		return Outcome{}, fmt.Errorf("%w: %s of account %q", ErrNotFound, key, account)
	default:
		return Outcome{}, fmt.Errorf("client: status of %s: the service answered %s: %s", key, code, reply.Header.Get("Nats-Service-Error"))
	}
	var o Outcome
	if err := json.Unmarshal(reply.Data, &o); err != nil {
		return Outcome{}, fmt.Errorf("client: status of %s: the answer does not parse: %w", key, err)
	}
	return o, nil
}

// Option changes what Status asks and what Await waits for.
type Option func(*statusOptions)

type statusOptions struct {
	seq  uint64
	done func(Outcome) bool
}

func options(opts []Option) statusOptions {
	o := statusOptions{done: Outcome.Settled}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Seq names the message of ATMOST_INTENTS that carried the intent, Receipt.Seq: then an intent
// that ingest refused (its account not configured, say) is an outcome, Rejected, instead of
// not found for ever.
func Seq(seq uint64) Option {
	return func(o *statusOptions) { o.seq = seq }
}

// Until makes Await return at the first outcome for which done is true, instead of the first
// settled one: Until(func(o Outcome) bool { return o.State == atmosttype.Published || o.State ==
// atmosttype.Parked }) waits through the retries of a failed intent. Status ignores it.
func Until(done func(Outcome) bool) Option {
	return func(o *statusOptions) { o.done = done }
}

// Await waits until the intent of account with key is settled (Outcome.Settled, or what Until
// says) and returns its outcome, for an intent created at any time, before the caller started
// too. It subscribes to the account's events first and asks Status second, so a transition
// made between the two is never missed; each of the intent's events makes it ask again, and so
// does Config.PollInterval passing without one. An intent not stored yet is asked for again
// with a growing pause, up to the same interval. When ctx ends it returns the last outcome it
// read (the zero Outcome if none) with ctx's error. ErrNoStatusService is returned at once.
func (c *Client) Await(ctx context.Context, account string, key identity.DeliveryKey, opts ...Option) (Outcome, error) {
	cfg := options(opts)
	// The events of the account reach every core subscriber as JetStream stores them. The
	// subscription goes out on this connection before the status request, so the server holds
	// it before the service reads the ledger.
	ch := make(chan *nats.Msg, 256)
	sub, err := c.nc.ChanSubscribe(events.AccountSubjects(account), ch)
	if err != nil {
		return Outcome{}, fmt.Errorf("client: await %s: %w", key, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	ofKey := "ev1:" + hex.EncodeToString(key.Bytes()) + ":"

	var last Outcome
	pause := 20 * time.Millisecond
	for {
		o, err := c.Status(ctx, account, key, opts...)
		wait := c.cfg.PollInterval
		switch {
		case err == nil:
			last = o
			if cfg.done(o) {
				return o, nil
			}
		case errors.Is(err, ErrNotFound):
			wait, pause = pause, min(2*pause, c.cfg.PollInterval)
		case errors.Is(err, ErrNoStatusService):
			return last, err
		}
		if ctx.Err() != nil {
			return last, fmt.Errorf("client: await %s: %w", key, ctx.Err())
		}
		if !c.nextEvent(ctx, ch, ofKey, wait) {
			return last, fmt.Errorf("client: await %s: %w", key, ctx.Err())
		}
	}
}

// nextEvent waits for an event whose id starts with ofKey, or for wait to pass; false when ctx
// ended first.
func (c *Client) nextEvent(ctx context.Context, ch <-chan *nats.Msg, ofKey string, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case m := <-ch:
			if strings.HasPrefix(m.Header.Get(jetstream.MsgIDHeader), ofKey) {
				return true
			}
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
}
