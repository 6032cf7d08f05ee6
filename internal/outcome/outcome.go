// Package outcome is the outcome service: it answers a producer's question "what became of my
// intent?" from the ledger, over NATS, so that a producer needs no database access. It is a
// service of nats.go's micro framework (`nats micro ls` lists it, `nats micro stats` counts its
// requests), named client.StatusService, listening on atmost.status.<account-token> in a queue
// group, so every role instance that serves it shares the requests. The protocol is
// pkg/client's; the ingest role serves it (docs/design.md#learning-the-outcome says why).
//
// The account is in the subject so that NATS permissions scope who may ask about which
// account's intents, as they scope who may publish them: an intent of another account is
// answered as not found, never with its state.
package outcome

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/version"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// Ledger is what the service reads: one intent by key, and the reject of one message; and what
// its cancel endpoint changes: one intent, by account and key. *ledger.Ledger is one.
type Ledger interface {
	Get(ctx context.Context, key identity.DeliveryKey) (ledger.Intent, error)
	RejectAt(ctx context.Context, stream string, seq int64) (ledger.StoredRejection, error)
	Cancel(ctx context.Context, account string, key identity.DeliveryKey, by ledger.Actor) (ledger.Cancellation, error)
}

// Config tunes the service. The zero value of every field means its default.
type Config struct {
	// Concurrency is how many requests are answered at once; micro hands a subscription's
	// requests over one at a time, and each answer is a ledger read. Default DefaultConcurrency.
	Concurrency int
	// Timeout bounds one ledger read. Default DefaultTimeout.
	Timeout time.Duration
	// Logger; nil means no logging.
	Logger *zap.Logger
	// Intents reads a message of ATMOST_INTENTS by its sequence, so that a request naming only
	// the sequence (a producer that sent no Atmost-Delivery-Key header) learns the key of its
	// message. Nil: such requests are bad requests.
	Intents IntentReader
}

// IntentReader reads one message of ATMOST_INTENTS; jetstream.Stream is one.
type IntentReader interface {
	GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error)
}

// The defaults of the configuration's fields (the zero value of a field means its default).
const (
	DefaultConcurrency = 8
	DefaultTimeout     = 2 * time.Second
)

func (c Config) withDefaults() Config {
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Service is the running outcome service.
type Service struct {
	svc      micro.Service
	ledger   Ledger
	cfg      Config
	nc       *nats.Conn
	work     chan asked
	quit     chan struct{}
	wg       sync.WaitGroup
	requests *prometheus.CounterVec
	stop     sync.Once
}

// Start serves the outcome service on nc until Stop; it listens when Start returns.
func Start(nc *nats.Conn, l Ledger, cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if cfg.Concurrency < 1 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("outcome: concurrency %d and timeout %s out of range", cfg.Concurrency, cfg.Timeout)
	}
	s := &Service{nc: nc, ledger: l, cfg: cfg, work: make(chan asked), quit: make(chan struct{}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_status_requests_total",
			Help: "Requests to the outcome service, by answer: found, rejected (ingest refused the message), not_found, bad_request, unavailable; and to its cancel endpoint: cancelled, too_late."}, []string{"answer"})}
	for _, a := range []string{"found", "rejected", "not_found", "bad_request", "unavailable", "cancelled", "too_late"} {
		s.requests.WithLabelValues(a)
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        client.StatusService,
		Version:     client.StatusVersion,
		Description: "the state and reason of an intent, by account and delivery key, read from atmost's ledger",
		Metadata:    map[string]string{"atmost_version": version.String()},
	})
	if err != nil {
		return nil, fmt.Errorf("outcome: %w", err)
	}
	for range cfg.Concurrency {
		s.wg.Add(1)
		go s.worker()
	}
	err = svc.AddEndpoint("status", micro.HandlerFunc(s.hand),
		micro.WithEndpointSubject(client.StatusSubjects),
		micro.WithEndpointMetadata(map[string]string{"request": `{"delivery_key":"dk1:..."}`, "reply": "client.Outcome"}))
	if err == nil {
		err = svc.AddEndpoint("cancel", micro.HandlerFunc(s.hand),
			micro.WithEndpointSubject(client.CancelSubjects),
			micro.WithEndpointMetadata(map[string]string{"request": `{"delivery_key":"dk1:..."}`, "reply": "client.CancelResult"}))
	}
	if err != nil {
		_ = svc.Stop()
		close(s.quit)
		s.wg.Wait()
		return nil, fmt.Errorf("outcome: %w", err)
	}
	s.svc = svc
	// Listening once Start returns: the subscription reached the server, not only a buffer.
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		s.Stop()
		return nil, fmt.Errorf("outcome: %w", err)
	}
	return s, nil
}

// Collectors are the service's metrics.
func (s *Service) Collectors() []prometheus.Collector { return []prometheus.Collector{s.requests} }

// Stop stops taking requests and waits for those being answered.
func (s *Service) Stop() {
	s.stop.Do(func() {
		_ = s.svc.Stop()
		// The subscription's removal reaches the server before Stop returns: a request made
		// after Stop finds no responder rather than this instance's "ask again".
		_ = s.nc.FlushTimeout(5 * time.Second)
		close(s.quit)
		s.wg.Wait()
	})
}

// asked is a request as a worker answers it: what it asked, and where the answer goes. The
// worker answers on the connection itself, never through the micro.Request: micro reads the
// request's error once the handler returns (for its statistics), while a worker may still be
// writing it, a data race. micro's statistics therefore count hand-offs, not answers;
// atmost_status_requests_total counts the answers.
type asked struct {
	subject, reply string
	data           []byte
}

// hand gives a request to a free worker. Stop drains the subscription after it returns, so a
// request may still come: it is told to ask again.
func (s *Service) hand(r micro.Request) {
	a := asked{subject: r.Subject(), reply: r.Reply(), data: bytes.Clone(r.Data())}
	select {
	case s.work <- a:
	case <-s.quit:
		s.fail(a, "unavailable", client.CodeUnavailable, "the service is stopping; ask again")
	}
}

func (s *Service) worker() {
	defer s.wg.Done()
	for {
		select {
		case r := <-s.work:
			s.answer(r)
		case <-s.quit:
			return
		}
	}
}

// answer reads the intent of one request and replies with its outcome or an error code.
func (s *Service) answer(r asked) {
	if token, ok := strings.CutPrefix(r.subject, "atmost.cancel."); ok {
		s.cancel(r, token)
		return
	}
	token := strings.TrimPrefix(r.subject, "atmost.status.")
	account, err := identity.ParseAccountToken(token)
	if err != nil {
		s.fail(r, "bad_request", client.CodeBadRequest, err.Error())
		return
	}
	var req client.StatusRequest
	dec := json.NewDecoder(bytes.NewReader(r.data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() || req.Key.IsZero() && !(req.Seq > 0 && s.cfg.Intents != nil) {
		s.fail(r, "bad_request", client.CodeBadRequest, `the body must be {"delivery_key":"dk1:<64 hex>"} or {"seq":<stream sequence>}`)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	out, refusal := Lookup(ctx, s.ledger, s.cfg.Intents, func(a string) bool { return a == account }, req)
	if refusal != nil {
		if refusal.Answer == AnswerUnavailable {
			s.cfg.Logger.Warn("the outcome service could not read the ledger or the intents stream", zap.Stringer("delivery_key", req.Key), zap.Error(refusal.Err))
		}
		s.fail(r, string(refusal.Answer), refusal.Answer.Code(), refusal.Description)
		return
	}
	if out.Rejected != nil {
		s.requests.WithLabelValues(string(AnswerRejected)).Inc()
	} else {
		s.requests.WithLabelValues(string(AnswerFound)).Inc()
	}
	s.respond(r, out)
}

// Answer is what became of one request, as atmost_status_requests_total counts it.
type Answer string

// The answers to a request.
const (
	AnswerFound       Answer = "found"       // a stored intent's outcome
	AnswerRejected    Answer = "rejected"    // ingest refused the message the request named
	AnswerNotFound    Answer = "not_found"   // nothing the asker may see
	AnswerBadRequest  Answer = "bad_request" // not a request
	AnswerUnavailable Answer = "unavailable" // the ledger or the stream did not answer; ask again
)

// Code is the service error code of a refusal.
func (a Answer) Code() string {
	switch a {
	case AnswerNotFound:
		return client.CodeNotFound
	case AnswerBadRequest:
		return client.CodeBadRequest
	}
	return client.CodeUnavailable
}

// Refusal is a request Lookup answers with no outcome: not found, bad, or not answerable now.
type Refusal struct {
	Answer      Answer
	Description string
	Err         error // the ledger's or the stream's error, for AnswerUnavailable
}

// Lookup answers one request as the outcome service does, for an asker who may see the intents
// of the accounts allowed admits: the outcome of the intent req.Key names (or, when req.Key is
// zero, of the message req.Seq names), or ingest's refusal of the message req.Seq names, or a
// Refusal. An intent, a message or a refusal of an account allowed does not admit is not found,
// exactly as one that does not exist: the answer never tells another account's intents apart
// from none. intents may be nil when req.Key is set. The outcome service asks it with the one
// account of the request's subject, ingest's HTTP API with the accounts of the producer's token.
func Lookup(ctx context.Context, l Ledger, intents IntentReader, allowed func(account string) bool, req client.StatusRequest) (client.Outcome, *Refusal) {
	if req.Key.IsZero() {
		if req.Seq == 0 || intents == nil {
			return client.Outcome{}, &Refusal{Answer: AnswerBadRequest, Description: "no delivery key, and no sequence to find it by"}
		}
		key, refusal := keyAt(ctx, intents, allowed, req.Seq)
		if refusal != nil {
			return client.Outcome{}, refusal
		}
		req.Key = key
	}
	in, err := l.Get(ctx, req.Key)
	if errors.Is(err, ledger.ErrNotFound) && req.Seq > 0 {
		var out client.Outcome
		if out, err = rejected(ctx, l, allowed, req); err == nil {
			return out, nil
		}
	}
	switch {
	case errors.Is(err, ledger.ErrNotFound), err == nil && !allowed(in.Account):
		// Another account's intent is not found for this one: its state is not this asker's.
		return client.Outcome{}, &Refusal{Answer: AnswerNotFound, Description: fmt.Sprintf("no intent %s of this account", req.Key)}
	case err != nil:
		return client.Outcome{}, &Refusal{Answer: AnswerUnavailable, Description: "the ledger could not be read; ask again", Err: err}
	}
	rule, _ := in.Reason.Rule()
	return client.Outcome{Key: in.Key, Account: in.Account, State: in.State, Reason: in.Reason, Retry: rule.Retry,
		Seq: in.Seq, ObjectID: in.ObjectID, UpdatedAt: in.UpdatedAt}, nil
}

// subjectAccount is the account whose intent subject subject is, and whether it is one.
func subjectAccount(subject string) (string, bool) {
	token, ok := strings.CutPrefix(subject, "atmost.intent.")
	if !ok {
		return "", false
	}
	account, err := identity.ParseAccountToken(token)
	return account, err == nil && events.IntentSubject(account) == subject
}

// keyAt derives the delivery key of the message at seq in ATMOST_INTENTS, as ingest does. The
// message counts only if it came on the subject of an account allowed admits: a sequence alone
// must not reveal another account's intent.
func keyAt(ctx context.Context, intents IntentReader, allowed func(string) bool, seq uint64) (identity.DeliveryKey, *Refusal) {
	msg, err := intents.GetMsg(ctx, seq)
	notFound := &Refusal{Answer: AnswerNotFound, Description: fmt.Sprintf("no message %d of this account on %s", seq, events.IntentsStream)}
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return identity.DeliveryKey{}, notFound
	case err != nil:
		return identity.DeliveryKey{}, &Refusal{Answer: AnswerUnavailable, Description: "the intents stream could not be read; ask again", Err: err}
	}
	if account, ok := subjectAccount(msg.Subject); !ok || !allowed(account) {
		return identity.DeliveryKey{}, notFound
	}
	env, err := identity.ParseEnvelope(msg.Data)
	if err != nil {
		return identity.DeliveryKey{}, &Refusal{Answer: AnswerNotFound, Description: fmt.Sprintf("message %d holds no valid envelope: %v", seq, err)}
	}
	return env.DeliveryKey(), nil
}

// rejected returns ingest's refusal of the message req.Seq names, or ledger.ErrNotFound. The
// refusal counts only for a message on the subject of an account allowed admits that named this
// key in its Atmost-Delivery-Key header: a sequence alone would let anyone read any message's
// refusal.
func rejected(ctx context.Context, l Ledger, allowed func(string) bool, req client.StatusRequest) (client.Outcome, error) {
	stored, err := l.RejectAt(ctx, events.IntentsStream, int64(req.Seq))
	if err != nil {
		return client.Outcome{}, err
	}
	account, ok := subjectAccount(stored.Subject)
	if !ok || !allowed(account) || !slices.Contains(stored.Headers[identity.DeliveryKeyHeader], req.Key.String()) {
		return client.Outcome{}, ledger.ErrNotFound
	}
	reason := identity.Reason(stored.Reason)
	return client.Outcome{Key: req.Key, Account: account,
		Rejected: &client.Rejection{Reason: reason, Detail: stored.Detail, Remedy: client.Remedy(reason, account)}}, nil
}

// CancelActor is the name the cancel endpoint writes to history: the producer that asked, known
// only by the account of the subject NATS let it request on.
const CancelActor = "producer"

// cancel answers one request of the cancel endpoint: the intent of the subject's account is
// parked cancelled if not yet authorized (ledger.Cancel decides, in one statement), and the
// answer says cancelled or too late with its state. An intent of another account is not found.
func (s *Service) cancel(r asked, token string) {
	account, err := identity.ParseAccountToken(token)
	if err != nil {
		s.fail(r, string(AnswerBadRequest), client.CodeBadRequest, err.Error())
		return
	}
	var req client.CancelRequest
	dec := json.NewDecoder(bytes.NewReader(r.data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() || req.Key.IsZero() {
		s.fail(r, string(AnswerBadRequest), client.CodeBadRequest, `the body must be {"delivery_key":"dk1:<64 hex>"}`)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	res, refusal := Cancel(ctx, s.ledger, account, req.Key, ledger.Actor{Name: CancelActor, Reason: "cancelled on " + r.subject})
	if refusal != nil {
		if refusal.Answer == AnswerUnavailable {
			s.cfg.Logger.Warn("the cancel endpoint could not reach the ledger", zap.Stringer("delivery_key", req.Key), zap.Error(refusal.Err))
		}
		s.fail(r, string(refusal.Answer), refusal.Answer.Code(), refusal.Description)
		return
	}
	if res.Cancelled {
		s.requests.WithLabelValues("cancelled").Inc()
	} else {
		s.requests.WithLabelValues("too_late").Inc()
	}
	data, err := json.Marshal(res)
	if err == nil {
		err = s.nc.Publish(r.reply, data)
	}
	if err != nil {
		s.cfg.Logger.Debug("the cancel endpoint could not answer", zap.Error(err))
	}
}

// Cancel asks the ledger to cancel the intent of account with key, as the cancel endpoint and
// ingest's HTTP API do: a result (cancelled, or too late with its state), or a Refusal (not
// found, also for another account's intent; unavailable: ask again, a cancel is safe to repeat).
func Cancel(ctx context.Context, l Ledger, account string, key identity.DeliveryKey, by ledger.Actor) (client.CancelResult, *Refusal) {
	c, err := l.Cancel(ctx, account, key, by)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return client.CancelResult{}, &Refusal{Answer: AnswerNotFound, Description: fmt.Sprintf("no intent %s of this account", key)}
	case err != nil:
		return client.CancelResult{}, &Refusal{Answer: AnswerUnavailable, Description: "the ledger could not be reached; ask again", Err: err}
	}
	return client.CancelResult{Key: key, Account: account, Cancelled: c.Cancelled, State: c.State, Reason: c.Reason, Seq: c.Seq}, nil
}

func (s *Service) respond(r asked, out client.Outcome) {
	data, err := json.Marshal(out)
	if err == nil {
		err = s.nc.Publish(r.reply, data)
	}
	if err != nil {
		s.cfg.Logger.Debug("the outcome service could not answer", zap.Error(err))
	}
}

// fail answers with a service error, as micro's Request.Error does: its description and code
// in the headers micro.ErrorHeader and micro.ErrorCodeHeader.
func (s *Service) fail(r asked, answer, code, description string) {
	s.requests.WithLabelValues(answer).Inc()
	msg := &nats.Msg{Subject: r.reply, Header: nats.Header{micro.ErrorHeader: []string{description}, micro.ErrorCodeHeader: []string{code}}}
	if err := s.nc.PublishMsg(msg); err != nil {
		s.cfg.Logger.Debug("the outcome service could not answer", zap.Error(err))
	}
}
