package ingest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/outcome"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// The HTTP API's limits. docs/http-api.yaml states each one; a change here is a change there.
const (
	// HTTPMaxBody bounds a request's body. A body over it is refused too_large and not stored,
	// as a NATS server refuses a message over its max_payload; one between
	// identity.MaxEnvelopeBytes and it is stored as a too_large reject, as on NATS.
	HTTPMaxBody = 256 << 10
	// HTTPMaxHeader bounds a request's head: its request line and header lines with their line
	// ends and the blank line after them (net/http answers 431 over it).
	HTTPMaxHeader = 16 << 10
	// httpHeaderSlop is what net/http reads of a request's head beyond the server's
	// MaxHeaderBytes ("bufio slop", Server.initialReadLimitSize): the server is given
	// HTTPMaxHeader less it, so the bound is HTTPMaxHeader itself.
	httpHeaderSlop = 4096
	// HTTPMaxWait bounds a long poll's ?wait=.
	HTTPMaxWait = 60 * time.Second
	// HTTPMaxStreams bounds the event streams one producer token holds open at once.
	HTTPMaxStreams = 4
	// HTTPKeepAlive is how often an idle event stream sends a comment, and how often it checks
	// that its token still works.
	HTTPKeepAlive = 15 * time.Second

	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 10 * time.Second
	httpIdleTimeout       = 60 * time.Second
	// verdictWait bounds how long a POST for an account the ledger does not know waits for
	// ingest's verdict before it answers 202 (the outcome tells the rest).
	verdictWait = 5 * time.Second
)

// APILedger is what the HTTP API reads from the ledger: the producer a token names, the
// accounts, the intents and the rejects. *ledger.Ledger is one.
type APILedger interface {
	outcome.Ledger
	ProducerByToken(ctx context.Context, token string) (ledger.Producer, error)
	Account(ctx context.Context, id string) (ledger.Account, error)
}

// HTTPConfig tunes the HTTP API; the zero value of every field means its default. Only tests
// shorten them.
type HTTPConfig struct {
	// KeepAlive is HTTPKeepAlive.
	KeepAlive time.Duration
	// MaxStreams is HTTPMaxStreams.
	MaxStreams int
	// StreamWriteTimeout bounds each write of an event stream, its end included (10 s, the
	// API's write timeout).
	StreamWriteTimeout time.Duration
	// Logger; nil means no logging.
	Logger *zap.Logger
}

// HTTPAPI is ingest's HTTP API for producers (docs/http-api.yaml): POST /v1/intents puts an
// envelope on ATMOST_INTENTS exactly as a NATS producer publishes it (its account's subject, its
// delivery key as Nats-Msg-Id), so the ingester stores it as it stores any message; GET
// /v1/intents/{key} answers as the outcome service does; GET /v1/accounts/{account}/events
// streams ATMOST_EVENTS as server-sent events. Every request carries a producer token, which
// acts only for its accounts: an account it is not bound to is refused 403 on a publish or a
// stream, and is not found on a read, whatever exists.
type HTTPAPI struct {
	js       jetstream.JetStream
	nc       *nats.Conn
	ledger   APILedger
	intents  outcome.IntentReader
	cfg      HTTPConfig
	log      *zap.Logger
	requests *prometheus.CounterVec

	mu      sync.Mutex
	streams map[string]int // open event streams by producer name
	// accounts are the accounts the ledger was seen to hold: an account is never deleted (a
	// revoked or disabled one keeps its row), so once seen it need not be read again. One not
	// seen is read on every publish, so an account added meanwhile is found at once.
	accounts sync.Map
}

// NewHTTPAPI returns the API on js's connection and l.
func NewHTTPAPI(ctx context.Context, js jetstream.JetStream, l APILedger, cfg HTTPConfig) (*HTTPAPI, error) {
	cfg.KeepAlive = cmp.Or(cfg.KeepAlive, HTTPKeepAlive)
	cfg.MaxStreams = cmp.Or(cfg.MaxStreams, HTTPMaxStreams)
	cfg.StreamWriteTimeout = cmp.Or(cfg.StreamWriteTimeout, httpWriteTimeout)
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	intents, err := js.Stream(ctx, events.IntentsStream)
	if err != nil {
		return nil, fmt.Errorf("http api: %s: %w", events.IntentsStream, err)
	}
	return &HTTPAPI{js: js, nc: js.Conn(), ledger: l, intents: intents, cfg: cfg, log: cfg.Logger.Named("http-api"),
		streams: map[string]int{},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_http_api_requests_total",
			Help: "Requests to ingest's HTTP API, by route and answer (the HTTP status, and the error code of a refusal)."}, []string{"route", "status", "code"}),
	}, nil
}

// Collectors are the API's metrics.
func (a *HTTPAPI) Collectors() []prometheus.Collector { return []prometheus.Collector{a.requests} }

// Routes are the routes the API serves, as "METHOD /path" patterns of net/http: every one is
// in docs/http-api.yaml and every path there is one of them (a test checks).
var Routes = []string{"POST /v1/intents", "GET /v1/intents/{key}", "GET /v1/accounts/{account}/events", "DELETE /v1/intents/{key}"}

// Handler serves the API's routes; anything else is a JSON 404 or 405.
func (a *HTTPAPI) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(Routes[0], a.publish)
	mux.HandleFunc(Routes[1], a.outcome)
	mux.HandleFunc(Routes[2], a.events)
	mux.HandleFunc(Routes[3], a.cancel)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			if r.URL.Path == "/v1/intents" || strings.HasPrefix(r.URL.Path, "/v1/intents/") && strings.Count(r.URL.Path, "/") == 3 ||
				strings.HasPrefix(r.URL.Path, "/v1/accounts/") && strings.HasSuffix(r.URL.Path, "/events") {
				a.refuse(w, "other", http.StatusMethodNotAllowed, apiError{Code: "method_not_allowed", Message: r.Method + " is not served on " + r.URL.Path})
				return
			}
			a.refuse(w, "other", http.StatusNotFound, apiError{Code: "not_found", Message: "no such route: see docs/http-api.yaml"})
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Serve serves the API on ln until ctx ends, with the limits of docs/http-api.yaml.
func (a *HTTPAPI) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: httpReadHeaderTimeout, ReadTimeout: httpReadTimeout,
		WriteTimeout: httpWriteTimeout, IdleTimeout: httpIdleTimeout, MaxHeaderBytes: HTTPMaxHeader - httpHeaderSlop,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	err := srv.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// apiError is the body of every refusal: {"error":{...}}.
type apiError struct {
	Code        string                `json:"code"`
	Message     string                `json:"message"`
	Seq         uint64                `json:"seq,omitempty"`
	DeliveryKey *identity.DeliveryKey `json:"delivery_key,omitempty"`
	Remedy      string                `json:"remedy,omitempty"`
}

func (a *HTTPAPI) refuse(w http.ResponseWriter, route string, status int, e apiError) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="atmost"`)
	}
	a.reply(w, route, status, e.Code, struct {
		Error apiError `json:"error"`
	}{e})
}

func (a *HTTPAPI) reply(w http.ResponseWriter, route string, status int, code string, body any) {
	a.requests.WithLabelValues(route, strconv.Itoa(status), code).Inc()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // one line, and < > & as they are: the answer is no HTML
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"the answer could not be written"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// authenticate returns the producer the request's bearer token names, or refuses the request
// (401, or 503 when the ledger did not answer) and returns false.
func (a *HTTPAPI) authenticate(w http.ResponseWriter, r *http.Request, route string) (ledger.Producer, bool) {
	token := bearer(r)
	if token == "" {
		a.refuse(w, route, http.StatusUnauthorized, apiError{Code: "unauthorized", Message: "send Authorization: Bearer <producer token> (atmost producers add)"})
		return ledger.Producer{}, false
	}
	p, err := a.ledger.ProducerByToken(r.Context(), token)
	switch {
	case errors.Is(err, ledger.ErrUnknownProducer):
		a.refuse(w, route, http.StatusUnauthorized, apiError{Code: "unauthorized", Message: "the token is no producer's, or its producer is revoked"})
		return ledger.Producer{}, false
	case err != nil:
		a.log.Warn("the ledger did not answer a token's lookup", zap.Error(err))
		a.refuse(w, route, http.StatusServiceUnavailable, apiError{Code: "unavailable", Message: "the ledger could not be read; ask again"})
		return ledger.Producer{}, false
	}
	return p, true
}

// bearer is the request's bearer token, "" when it has none.
func bearer(r *http.Request) string {
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// receipt is a 202's body.
type receipt struct {
	Key       identity.DeliveryKey `json:"delivery_key"`
	Seq       uint64               `json:"seq"`
	Duplicate bool                 `json:"duplicate"`
}

// rejectStatus is the HTTP status of a refusal for reason: 413 for too_large, 400 for a body
// that is no JSON object or no envelope header, 422 for a JSON object that is no valid or no
// acceptable envelope.
func rejectStatus(reason identity.Reason) int {
	switch reason {
	case identity.ReasonTooLarge:
		return http.StatusRequestEntityTooLarge
	case identity.ReasonMalformedJSON, identity.ReasonNotObject, identity.ReasonDuplicateField, identity.ReasonInvalidUTF8,
		identity.ReasonInvalidKeyHeader, identity.ReasonInvalidHeader, identity.ReasonMisdirectedReply:
		return http.StatusBadRequest
	}
	return http.StatusUnprocessableEntity
}

// publish is POST /v1/intents. The body goes on ATMOST_INTENTS as it came, on the subject of
// its account, so the ingester takes it exactly as a NATS producer's message: a valid envelope
// with its key as Nats-Msg-Id (a replay inside JetStream's window is its duplicate), a refused
// one without (its reject is stored by the ingester, as every refusal is, and a fixed envelope
// sent after it is not dropped as its duplicate). The answer is given once JetStream has stored
// the message: the verdict of the same Parse the ingester runs, so a 202 here is never a reject
// there and a 4xx never an intent. Only an account the ledger does not know is decided by the
// ingester, at its store; the answer waits for that verdict.
func (a *HTTPAPI) publish(w http.ResponseWriter, r *http.Request) {
	const route = "publish"
	p, ok := a.authenticate(w, r, route)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, HTTPMaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		a.refuse(w, route, http.StatusRequestEntityTooLarge, apiError{Code: string(identity.ReasonTooLarge),
			Message: fmt.Sprintf("the body is over %d bytes: nothing was stored (an envelope is at most %d bytes)", HTTPMaxBody, identity.MaxEnvelopeBytes)})
		return
	case err != nil:
		a.refuse(w, route, http.StatusBadRequest, apiError{Code: string(identity.ReasonMalformedJSON), Message: "the body could not be read: " + err.Error()})
		return
	}
	account, ok := bodyAccount(body, p)
	if !ok {
		a.refuse(w, route, http.StatusForbidden, apiError{Code: "account_not_bound",
			Message: fmt.Sprintf("the token of producer %s does not act for account %s: nothing was stored", p.Name, quoteShort(account))})
		return
	}
	header := nats.Header{}
	for _, name := range []string{identity.DeliveryKeyHeader, tracecontext.Header, tracecontext.StateHeader} {
		for _, v := range r.Header.Values(name) {
			header.Add(name, v)
		}
	}
	subject := events.IntentSubject(account)
	env, refusal := Parse(subject, header, body)
	if rej := new(identity.RejectError); refusal == nil && errors.As(env.CheckSchedule(time.Now()), &rej) {
		// Refused here as ingest would refuse it (against the stored message's time), before
		// anything is stored.
		refusal = rej
	}
	var key *identity.DeliveryKey
	if env.Account != "" {
		k := env.DeliveryKey()
		key = &k
	}
	existed, unknownAccount := false, false
	if refusal == nil {
		// A key the ledger holds is a duplicate however long ago it was published; an account it
		// does not know is the ingester's refusal unknown_account, whose verdict is waited for.
		existed, unknownAccount, err = a.known(r.Context(), env)
		if err != nil {
			a.log.Warn("the ledger did not answer before a publish", zap.Error(err))
			a.refuse(w, route, http.StatusServiceUnavailable, apiError{Code: "unavailable", Message: "the ledger could not be read; nothing was published: send the same envelope again"})
			return
		}
		if !unknownAccount {
			header.Set(jetstream.MsgIDHeader, key.String())
		}
	}
	ack, err := a.js.PublishMsg(r.Context(), &nats.Msg{Subject: subject, Header: header, Data: body})
	if err != nil {
		a.log.Warn("a publish through the HTTP API got no acknowledgement", zap.Error(err))
		a.refuse(w, route, http.StatusServiceUnavailable, apiError{Code: "unavailable", DeliveryKey: key,
			Message: "JetStream did not acknowledge the message, which may or may not be stored: send the same envelope again (it is one intent however often it is sent)"})
		return
	}
	switch {
	case refusal != nil:
		a.refuse(w, route, rejectStatus(refusal.Reason), apiError{Code: string(refusal.Reason), Message: refusal.Detail, Seq: ack.Sequence, DeliveryKey: key,
			Remedy: client.Remedy(refusal.Reason, env.Account)})
		return
	case unknownAccount:
		if rej, ok := a.verdict(r.Context(), *key, ack.Sequence); ok {
			a.refuse(w, route, rejectStatus(rej.Reason), apiError{Code: string(rej.Reason), Message: rej.Detail, Seq: ack.Sequence, DeliveryKey: key,
				Remedy: "an operator adds the account (atmost accounts add) and either replays this reject (atmost rejects replay) or you send the same envelope again"})
			return
		}
	}
	a.reply(w, route, http.StatusAccepted, "", receipt{Key: *key, Seq: ack.Sequence, Duplicate: ack.Duplicate || existed})
}

// bodyAccount is the account body is published for, and whether p acts for it: the account of
// the envelope body is, as ingest parses it; for a body that is no valid envelope the account
// it names as a string, if any; otherwise the first of p's accounts, whose subject then
// carries the body to its reject.
func bodyAccount(body []byte, p ledger.Producer) (string, bool) {
	if env, err := identity.ParseEnvelope(body); err == nil {
		return env.Account, p.ActsFor(env.Account)
	}
	var named struct {
		Account json.RawMessage `json:"account"`
	}
	var account string
	if json.Unmarshal(body, &named) == nil && json.Unmarshal(named.Account, &account) == nil && account != "" {
		return account, p.ActsFor(account)
	}
	return p.Accounts[0], true
}

// known reports whether the ledger holds env's key already, and whether it knows its account.
func (a *HTTPAPI) known(ctx context.Context, env identity.Envelope) (existed, unknownAccount bool, err error) {
	_, err = a.ledger.Get(ctx, env.DeliveryKey())
	switch {
	case err == nil:
		return true, false, nil
	case !errors.Is(err, ledger.ErrNotFound):
		return false, false, err
	}
	if _, seen := a.accounts.Load(env.Account); seen {
		return false, false, nil
	}
	_, err = a.ledger.Account(ctx, env.Account)
	switch {
	case errors.Is(err, ledger.ErrUnknownAccount):
		return false, true, nil
	case err != nil:
		return false, false, err
	}
	a.accounts.Store(env.Account, true)
	return false, false, nil
}

// verdict waits, up to verdictWait, for the ingester to store the message at seq: its
// rejection and true when it refused it, false when it stored the intent (the account was added
// meanwhile) or did not decide in time.
func (a *HTTPAPI) verdict(ctx context.Context, key identity.DeliveryKey, seq uint64) (*client.Rejection, bool) {
	ctx, cancel := context.WithTimeout(ctx, verdictWait)
	defer cancel()
	for {
		stored, err := a.ledger.RejectAt(ctx, events.IntentsStream, int64(seq))
		if err == nil {
			return &client.Rejection{Reason: identity.Reason(stored.Reason), Detail: stored.Detail}, true
		}
		if _, err := a.ledger.Get(ctx, key); err == nil {
			return nil, false
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// outcome is GET /v1/intents/{key}: the outcome service's answer for the accounts the token acts
// for, and with ?wait= the first settled one within it. It waits on the accounts' events,
// reading the ledger again at each event and at least every second.
func (a *HTTPAPI) outcome(w http.ResponseWriter, r *http.Request) {
	const route = "outcome"
	p, ok := a.authenticate(w, r, route)
	if !ok {
		return
	}
	key, err := identity.ParseDeliveryKey(r.PathValue("key"))
	if err != nil {
		a.refuse(w, route, http.StatusBadRequest, apiError{Code: "invalid_key", Message: "the path must name a delivery key, dk1: and 64 lower-case hex digits"})
		return
	}
	req := client.StatusRequest{Key: key}
	if s := r.URL.Query().Get("seq"); s != "" {
		if req.Seq, err = strconv.ParseUint(s, 10, 64); err != nil || req.Seq == 0 {
			a.refuse(w, route, http.StatusBadRequest, apiError{Code: "invalid_seq", Message: "seq must be a stream sequence, a positive integer"})
			return
		}
	}
	var wait time.Duration
	if s := r.URL.Query().Get("wait"); s != "" {
		if wait, err = time.ParseDuration(s); err != nil || wait < 0 || wait > HTTPMaxWait {
			a.refuse(w, route, http.StatusBadRequest, apiError{Code: "invalid_wait", Message: fmt.Sprintf("wait must be a duration (30s, 1m) of at most %s", HTTPMaxWait)})
			return
		}
	}
	ctx := r.Context()
	var changed chan *nats.Msg
	if wait > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + httpWriteTimeout))
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
		// Subscribed before the first read, so no transition falls between the two.
		changed = make(chan *nats.Msg, 64)
		for _, account := range p.Accounts {
			sub, err := a.nc.ChanSubscribe(events.AccountSubjects(account), changed)
			if err != nil {
				continue // the poll below still sees it
			}
			defer func() { _ = sub.Unsubscribe() }()
		}
		_ = a.nc.FlushWithContext(ctx)
	}
	for {
		// Read after the wait too, so the answer is the state at its end.
		read, cancelRead := context.WithTimeout(context.WithoutCancel(ctx), httpWriteTimeout/2)
		out, refusal := outcome.Lookup(read, a.ledger, a.intents, p.ActsFor, req)
		cancelRead()
		switch {
		case refusal != nil && refusal.Answer == outcome.AnswerUnavailable:
			a.log.Warn("the ledger did not answer an outcome", zap.Error(refusal.Err))
			a.refuse(w, route, http.StatusServiceUnavailable, apiError{Code: "unavailable", Message: refusal.Description})
			return
		case wait == 0 || ctx.Err() != nil || refusal == nil && out.Settled():
			if refusal != nil {
				a.refuse(w, route, http.StatusNotFound, apiError{Code: "not_found",
					Message: fmt.Sprintf("no intent %s of an account this token acts for (not stored yet, refused, never published, or not yours)", key)})
				return
			}
			a.reply(w, route, http.StatusOK, "", out)
			return
		}
		a.waitForChange(ctx, changed, key)
	}
}

// cancel is DELETE /v1/intents/{key}: the producer's cancel (outcome.Cancel, the statement
// ledger.Cancel runs). 200 with a client.CancelResult either way: cancelled true when the
// intent is parked cancelled (now or by an earlier cancel), false when it was too late, with
// the state it is in. An intent of an account the token does not act for is not found, as one
// that does not exist.
func (a *HTTPAPI) cancel(w http.ResponseWriter, r *http.Request) {
	const route = "cancel"
	p, ok := a.authenticate(w, r, route)
	if !ok {
		return
	}
	key, err := identity.ParseDeliveryKey(r.PathValue("key"))
	if err != nil {
		a.refuse(w, route, http.StatusBadRequest, apiError{Code: "invalid_key", Message: "the path must name a delivery key, dk1: and 64 lower-case hex digits"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), httpWriteTimeout/2)
	defer cancel()
	notFound := func() {
		a.refuse(w, route, http.StatusNotFound, apiError{Code: "not_found",
			Message: fmt.Sprintf("no intent %s of an account this token acts for (not stored yet, refused, never published, or not yours)", key)})
	}
	in, err := a.ledger.Get(ctx, key)
	switch {
	case errors.Is(err, ledger.ErrNotFound), err == nil && !p.ActsFor(in.Account):
		notFound()
		return
	case err != nil:
		a.log.Warn("the ledger did not answer a cancel", zap.Error(err))
		a.refuse(w, route, http.StatusServiceUnavailable, apiError{Code: "unavailable", Message: "the ledger could not be reached; ask again (a cancel is safe to repeat)"})
		return
	}
	res, refusal := outcome.Cancel(ctx, a.ledger, in.Account, key, ledger.Actor{Name: p.Name, Reason: "cancelled through the HTTP API"})
	switch {
	case refusal != nil && refusal.Answer == outcome.AnswerNotFound:
		notFound()
	case refusal != nil:
		a.log.Warn("the ledger did not answer a cancel", zap.Error(refusal.Err))
		a.refuse(w, route, http.StatusServiceUnavailable, apiError{Code: "unavailable", Message: refusal.Description})
	default:
		a.reply(w, route, http.StatusOK, "", res)
	}
}

// waitForChange returns at the next event of key on changed, after a second, or when ctx ends.
func (a *HTTPAPI) waitForChange(ctx context.Context, changed chan *nats.Msg, key identity.DeliveryKey) {
	poll := time.NewTimer(time.Second)
	defer poll.Stop()
	want := []byte(key.String())
	for {
		select {
		case m := <-changed:
			if bytes.Contains(m.Data, want) {
				return
			}
		case <-poll.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// events is GET /v1/accounts/{account}/events: an ordered consumer of ATMOST_EVENTS on the
// account's subjects, each event written as one SSE event whose id is its stream sequence.
func (a *HTTPAPI) events(w http.ResponseWriter, r *http.Request) {
	const route = "events"
	p, ok := a.authenticate(w, r, route)
	if !ok {
		return
	}
	account := r.PathValue("account")
	if err := identity.ValidateAccount(account); err != nil {
		a.refuse(w, route, http.StatusBadRequest, apiError{Code: string(identity.ReasonInvalidAccount), Message: err.Error()})
		return
	}
	if !p.ActsFor(account) {
		a.refuse(w, route, http.StatusForbidden, apiError{Code: "account_not_bound",
			Message: fmt.Sprintf("the token of producer %s does not act for account %s", p.Name, quoteShort(account))})
		return
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.AccountSubjects(account)}, DeliverPolicy: jetstream.DeliverNewPolicy}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		seq, err := strconv.ParseUint(last, 10, 64)
		if err != nil || seq == math.MaxUint64 {
			a.refuse(w, route, http.StatusBadRequest, apiError{Code: "invalid_last_event_id", Message: "Last-Event-ID must be the id of an event of this stream, a stream sequence"})
			return
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
	}
	if !a.openStream(p.Name) {
		a.refuse(w, route, http.StatusTooManyRequests, apiError{Code: "too_many_streams",
			Message: fmt.Sprintf("the token of producer %s holds %d event streams open already", p.Name, a.cfg.MaxStreams)})
		return
	}
	defer a.closeStream(p.Name)
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	cons, err := a.js.OrderedConsumer(ctx, events.EventsStream, cfg)
	if err != nil {
		a.log.Warn("an event stream could not start", zap.Error(err))
		a.refuse(w, route, http.StatusServiceUnavailable, apiError{Code: "unavailable", Message: "JetStream did not answer; ask again"})
		return
	}
	msgs, err := cons.Messages()
	if err != nil {
		a.refuse(w, route, http.StatusServiceUnavailable, apiError{Code: "unavailable", Message: "JetStream did not answer; ask again"})
		return
	}
	defer msgs.Stop()
	feed := make(chan jetstream.Msg)
	go func() {
		defer close(feed)
		for {
			m, err := msgs.Next()
			if err != nil {
				return
			}
			select {
			case feed <- m:
			case <-ctx.Done():
				return
			}
		}
	}()

	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	a.requests.WithLabelValues(route, "200", "").Inc()
	// Each write has its own deadline: a reader that stops reading is dropped, one that reads
	// stays connected for as long as it likes.
	write := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(a.cfg.StreamWriteTimeout))
		if _, err := io.WriteString(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// net/http writes the stream's end (the last, empty chunk) after the handler returns, under
	// the last write's deadline, which a keep-alive interval longer than the write timeout has
	// passed: the end would fail, and the reader see a broken transfer instead of an end.
	defer func() { _ = rc.SetWriteDeadline(time.Now().Add(a.cfg.StreamWriteTimeout)) }()
	if !write(": atmost events of " + strconv.Quote(account) + "\n\n") {
		return
	}
	token := bearer(r)
	keepAlive := time.NewTicker(a.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case m, open := <-feed:
			if !open {
				return
			}
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			to := strings.TrimPrefix(m.Subject(), "atmost.event.")
			to, _, _ = strings.Cut(to, ".")
			if !write(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", meta.Sequence.Stream, to, bytes.TrimSpace(m.Data()))) {
				return
			}
		case <-keepAlive.C:
			// A revoked token's stream ends here, within one keep-alive of the revocation.
			if _, err := a.ledger.ProducerByToken(ctx, token); errors.Is(err, ledger.ErrUnknownProducer) {
				return
			}
			if !write(": keep-alive\n\n") {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

func (a *HTTPAPI) openStream(producer string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.streams[producer] >= a.cfg.MaxStreams {
		return false
	}
	a.streams[producer]++
	return true
}

func (a *HTTPAPI) closeStream(producer string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.streams[producer]--; a.streams[producer] <= 0 {
		delete(a.streams, producer)
	}
}
