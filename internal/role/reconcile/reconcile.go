// Package reconcile is the reconciler role: it resolves indeterminate intents by looking, at
// most once, at the platform. Per intent it first reads the evidence of fenced-out workers (a
// confirmed late success resolves the intent without a lookup), then waits the adapter's
// reconcile delay, claims the one lookup durably, and makes it: found (and read back) ->
// published; not found -> parked, unless an idempotency-status lookup proves not-sent ->
// failed; unavailable -> parked. A lookup claimed and never resolved (a crash after the claim)
// is never made again: the sweeper parks the intent for a human.
package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/natsconn"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// Config tunes a Reconciler. The zero value of every field means its default.
type Config struct {
	// Durable names the consumer of indeterminate events on ATMOST_EVENTS. Default
	// DefaultDurable; every reconciler process shares it.
	Durable string
	// Concurrency is how many intents are worked at once: reads, the one lookup, its read-back
	// and its resolution. An intent waiting out its reconcile delay holds none of them. Default
	// DefaultConcurrency.
	Concurrency int
	// MaxAckPending bounds the indeterminate events held unacknowledged while their intents
	// wait out the reconcile delay (on the server, by NakWithDelay): the pace of reconciliation
	// is at most MaxAckPending per reconcile delay. It is the shared consumer's setting, so the
	// reconciler that starts last sets it for all. Default DefaultMaxAckPending, which keeps pace with 3,000
	// unknown outcomes a second at a 30 s delay.
	MaxAckPending int
	// LookupTimeout bounds the one lookup. Default DefaultLookupTimeout.
	LookupTimeout time.Duration
	// ReadBackTimeout bounds the read-back of a found object or of a fenced-out worker's
	// reported one. Default DefaultReadBackTimeout.
	ReadBackTimeout time.Duration
	// ScanInterval is how often the ledger is scanned for indeterminate intents whose event was
	// missed (the safety net). Each scan pages through every candidate. Default DefaultScanInterval.
	ScanInterval time.Duration
	// ScanAfter is how long an intent must have been indeterminate, with its lookup not claimed,
	// before the scan takes it as missed by the event path, which works it at its reconcile
	// delay. A missed event whose delay is shorter is taken up within ScanAfter + ScanInterval.
	// Default DefaultScanAfter.
	ScanAfter time.Duration
	// ScanBatch is the page size of a scan. Default DefaultScanBatch.
	ScanBatch int
	// RetryDelay is how long an intent waits when it could not be worked now (its account's
	// adapter could not be opened, the ledger failed). Default DefaultRetryDelay.
	RetryDelay time.Duration
	// AckWait is how long JetStream waits for an acknowledgement before redelivering an
	// event; InProgress keeps it while an intent is worked. Default DefaultAckWait.
	AckWait time.Duration
	// Platforms opens the accounts' adapters.
	Platforms platform.Registry
	// Logger; nil means no logging.
	Logger *zap.Logger
	// Tracer makes the span of each turn that works an intent, continuing the trace the
	// intent was stored with, and those of its lookup and read-backs; nil means the no-op
	// provider.
	Tracer trace.TracerProvider

	hook func(step string) // tests: crash points
	// pull holds the consumer's pull options (tests only: a short expiry, so that missed
	// heartbeats show within a test).
	pull []jetstream.PullMessagesOpt
}

// The defaults of Config's fields (the zero value of a field means its default), which the
// role's flags show too.
const (
	DefaultDurable         = "reconciler"
	DefaultConcurrency     = 16
	DefaultMaxAckPending   = 100_000
	DefaultLookupTimeout   = 10 * time.Second
	DefaultReadBackTimeout = 5 * time.Second
	DefaultScanInterval    = 10 * time.Second
	DefaultScanAfter       = time.Minute
	DefaultScanBatch       = 500
	DefaultRetryDelay      = 30 * time.Second
	DefaultAckWait         = 30 * time.Second
)

func (c Config) withDefaults() Config {
	c.Durable = cmp.Or(c.Durable, DefaultDurable)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.MaxAckPending = cmp.Or(c.MaxAckPending, DefaultMaxAckPending)
	c.LookupTimeout = cmp.Or(c.LookupTimeout, DefaultLookupTimeout)
	c.ReadBackTimeout = cmp.Or(c.ReadBackTimeout, DefaultReadBackTimeout)
	c.ScanInterval = cmp.Or(c.ScanInterval, DefaultScanInterval)
	c.ScanAfter = cmp.Or(c.ScanAfter, DefaultScanAfter)
	c.ScanBatch = cmp.Or(c.ScanBatch, DefaultScanBatch)
	c.RetryDelay = cmp.Or(c.RetryDelay, DefaultRetryDelay)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

func (c Config) validate() error {
	if c.Platforms == nil {
		return errors.New("reconcile: no platforms configured")
	}
	if c.Concurrency < 1 || c.ScanBatch < 1 || c.MaxAckPending < 1 {
		return fmt.Errorf("reconcile: concurrency %d, max ack pending %d and scan batch %d must be at least 1", c.Concurrency, c.MaxAckPending, c.ScanBatch)
	}
	for name, v := range map[string]time.Duration{"lookup timeout": c.LookupTimeout, "read-back timeout": c.ReadBackTimeout,
		"scan interval": c.ScanInterval, "scan after": c.ScanAfter, "retry delay": c.RetryDelay, "ack wait": c.AckWait} {
		if v <= 0 {
			return fmt.Errorf("reconcile: %s %s must be positive", name, v)
		}
	}
	if c.AckWait < time.Second {
		// A lookup is kept alive every third of it (natsconn.KeepAlive), as the dispatcher's sends are.
		return fmt.Errorf("reconcile: ack wait %s: must be at least 1s", c.AckWait)
	}
	return nil
}

// crash is the process-wide crash point, set by the subprocess tests (SIGKILL after a step).
var crash func(step string)

// Reconciler resolves indeterminate intents.
type Reconciler struct {
	cfg      Config
	ledger   Ledger
	relay    *relay.Relay
	consumer jetstream.Consumer
	adapters *adapters.Cache
	log      *zap.Logger
	counts   *counters
	slots    chan struct{}
	mu       sync.Mutex
	// busy holds the keys being worked in this process, so the scan and an event never work
	// one intent at once here (across processes the ledger's claim decides).
	busy map[identity.DeliveryKey]bool
	// held are the lookups this process holds whose ledger write it could not confirm: a claim
	// whose answer was lost, or a lookup made whose result is not recorded yet. A later turn
	// (the event's redelivery, or the next scan) goes on from there, with the same claim token,
	// and never looks up twice.
	held     map[identity.DeliveryKey]*heldLookup
	accounts map[string]readAccount
	// unpublished are resolved intents whose transitions wait for the next publishing round.
	unpublished []identity.DeliveryKey
	publishing  sync.Mutex
	tracer      trace.Tracer
}

// Ledger is what the reconciler does with the ledger: read an intent's reconciliation, resolve it
// from evidence, claim and resolve its one lookup, and scan for what the events missed.
// *ledger.Ledger is one.
type Ledger interface {
	ReconcileStatusOf(ctx context.Context, key identity.DeliveryKey) (ledger.ReconcileStatus, error)
	Inspect(ctx context.Context, key identity.DeliveryKey) (ledger.Record, error)
	Gates(ctx context.Context, accounts []string) (map[string]ledger.Gate, error)
	ResolveFromEvidence(ctx context.Context, key identity.DeliveryKey, objectID string) error
	ClaimReconciliation(ctx context.Context, key identity.DeliveryKey, token ledger.ClaimToken) (ledger.Reconciliation, error)
	ResolveReconciliation(ctx context.Context, r ledger.Reconciliation, result ledger.LookupResult, objectID string, detail map[string]any) (ledger.State, error)
	ReconcileCandidates(ctx context.Context, minAge time.Duration, after ledger.ReconcileCandidate, max int) ([]ledger.ReconcileCandidate, error)
}

// New creates (or attaches to) the durable consumer of indeterminate events on ATMOST_EVENTS.
func New(ctx context.Context, js jetstream.JetStream, l Ledger, rel *relay.Relay, cfg Config) (*Reconciler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	consumer, err := js.CreateOrUpdateConsumer(ctx, events.EventsStream, jetstream.ConsumerConfig{
		Durable:   cfg.Durable,
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   cfg.AckWait,
		// An event waiting out its intent's reconcile delay (NakWithDelay) stays pending on the
		// server and holds no worker here; this bounds how many may wait at once.
		MaxAckPending: cfg.MaxAckPending,
		FilterSubject: events.StateSubjects(string(ledger.Indeterminate)),
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: consumer %s on %s: %w", cfg.Durable, events.EventsStream, err)
	}
	return &Reconciler{cfg: cfg, ledger: l, relay: rel, consumer: consumer, adapters: adapters.NewCache(cfg.Platforms),
		log: cfg.Logger.Named("reconcile"), counts: newCounters(), slots: make(chan struct{}, cfg.Concurrency),
		busy: map[identity.DeliveryKey]bool{}, held: map[identity.DeliveryKey]*heldLookup{}, accounts: map[string]readAccount{},
		tracer: tracing.Or(cfg.Tracer).Tracer("github.com/atmost/atmost/internal/role/reconcile")}, nil
}

// Verdict is what became of one intent's turn.
type Verdict struct {
	// Wait > 0: not now; take the intent up again after Wait. Otherwise it is done with here.
	Wait time.Duration
	// Result names what happened, as the metrics count it.
	Result string
}

func done(result string) Verdict { return Verdict{Result: result} }
func later(result string, d time.Duration) Verdict {
	return Verdict{Wait: max(d, time.Millisecond), Result: result}
}

// Run reconciles until ctx ends: from indeterminate events as they arrive, and from a scan of
// the ledger every ScanInterval. On return every intent in hand has finished its turn.
func (r *Reconciler) Run(ctx context.Context) error {
	it, err := r.consumer.Messages(append([]jetstream.PullMessagesOpt{jetstream.PullMaxMessages(2 * r.cfg.Concurrency)}, r.cfg.pull...)...)
	if err != nil {
		return fmt.Errorf("reconcile: consume: %w", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { r.scanLoop(ctx) })
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	var iterErr error
	for {
		m, err := natsconn.Next(it, r.log)
		if err != nil {
			if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				iterErr = err
			}
			break
		}
		if !r.acquire(ctx) {
			_ = m.Nak()
			break
		}
		wg.Go(func() {
			defer r.release()
			r.handle(ctx, m)
		})
	}
	wg.Wait()
	if ctx.Err() == nil {
		return fmt.Errorf("reconcile: events stopped arriving: %w", iterErr)
	}
	return nil
}

func (r *Reconciler) acquire(ctx context.Context) bool {
	select {
	case r.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *Reconciler) release() { <-r.slots }

// handle works the intent of one indeterminate event and settles the message: acknowledged
// when the intent is done with here, redelivered after the wait otherwise.
func (r *Reconciler) handle(ctx context.Context, m jetstream.Msg) {
	e, err := events.Unmarshal(m.Data())
	if err != nil {
		r.log.Warn("an unreadable event on the indeterminate subject; dropped", zap.String("subject", m.Subject()), zap.Error(err))
		r.counts.turn("unreadable_event")
		_ = m.Term()
		return
	}
	if wait := r.untilDue(ctx, e.Account, e.At); wait > 0 {
		// Not due yet: the event waits on the server, holding no worker and reading nothing.
		r.counts.turn("waiting_delay")
		_ = m.NakWithDelay(wait)
		return
	}
	keep := natsconn.KeepAlive(m, r.cfg.AckWait/3)
	v := r.Reconcile(context.WithoutCancel(ctx), e.DeliveryKey)
	keep()
	if v.Wait > 0 {
		_ = m.NakWithDelay(v.Wait)
		return
	}
	_ = m.Ack()
}

// scanHeld works the lookups this process holds unconfirmed, which no candidate page lists.
func (r *Reconciler) scanHeld(ctx context.Context) {
	var wg sync.WaitGroup
	for _, key := range r.heldKeys() {
		if !r.acquire(ctx) {
			break
		}
		wg.Go(func() {
			defer r.release()
			r.Reconcile(context.WithoutCancel(ctx), key)
		})
	}
	wg.Wait()
}

// scanLoop is the safety net: at start and then every ScanInterval, every indeterminate intent
// nobody claimed a lookup for within ScanAfter, whatever became of its event, page by page.
func (r *Reconciler) scanLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.ScanInterval)
	defer t.Stop()
	for {
		r.scan(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Reconciler) scan(ctx context.Context) {
	r.scanHeld(ctx)
	var after ledger.ReconcileCandidate
	for {
		page, err := r.ledger.ReconcileCandidates(ctx, r.cfg.ScanAfter, after, r.cfg.ScanBatch)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("scan for indeterminate intents failed; the next scan tries again", zap.Error(err))
			}
			return
		}
		var wg sync.WaitGroup
		for _, c := range page {
			if r.untilDue(ctx, c.Account, c.Since) > 0 {
				continue // an account whose delay is longer than ScanAfter: its event still may come
			}
			if !r.acquire(ctx) {
				break
			}
			wg.Go(func() {
				defer r.release()
				v := r.Reconcile(context.WithoutCancel(ctx), c.Key)
				if v.Result == "evidence_found" || strings.HasPrefix(v.Result, "resolved_") {
					r.counts.scanned.Inc()
				}
			})
		}
		wg.Wait()
		if len(page) < r.cfg.ScanBatch || ctx.Err() != nil {
			return
		}
		after = page[len(page)-1]
	}
}

func (r *Reconciler) crashPoint(step string) {
	if crash != nil {
		crash(step)
	}
	if r.cfg.hook != nil {
		r.cfg.hook(step)
	}
}

// Reconcile takes one indeterminate intent as far as it can now. It is safe to call for any
// key, any number of times, from any number of processes: the evidence resolution and the
// lookup claim are guarded in the ledger, and a lookup is made only after its claim committed.
func (r *Reconciler) Reconcile(ctx context.Context, key identity.DeliveryKey) Verdict {
	r.mu.Lock()
	if r.busy[key] {
		r.mu.Unlock()
		return later("busy_here", time.Second)
	}
	r.busy[key] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.busy, key)
		r.mu.Unlock()
	}()
	v := r.reconcile(ctx, key)
	r.counts.turn(v.Result)
	return v
}

func (r *Reconciler) reconcile(ctx context.Context, key identity.DeliveryKey) (v Verdict) {
	log := r.log.With(zap.Stringer("key", key))
	status, err := r.ledger.ReconcileStatusOf(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		r.forget(key)
		return done("not_found")
	}
	if err != nil {
		log.Warn("reading the intent failed; trying again later", zap.Error(err))
		return later("ledger_error", r.cfg.RetryDelay)
	}
	h := r.heldOf(key)
	if h != nil && h.looked {
		// The lookup was made on an earlier turn: its result is written again, and the ledger
		// says whether the first write had landed (or the intent moved on without it).
		return r.record(ctx, log, key, h)
	}
	if h != nil && h.attempt != status.Intent.Token {
		// An unconfirmed claim of an attempt the intent has left: it is no one's lookup now.
		r.forget(key)
		h = nil
	}
	if status.Intent.State != ledger.Indeterminate {
		r.forget(key)
		return done("not_indeterminate")
	}
	if status.Claimed && h == nil {
		// Another reconciler holds the one lookup, or held it and died: never a second one.
		return done("already_claimed")
	}
	// A turn that works the intent continues the trace it was stored with: a child of
	// ingest's store span, beside the dispatcher's attempts.
	ctx, span := r.tracer.Start(tracecontext.WithTraceParent(ctx, status.Intent.TraceParent), tracing.SpanReconcile)
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(tracing.DeliveryKey.String(key.String()), tracing.Account.String(status.Intent.Account), tracing.Outcome.String(v.Result))
		}
		span.End()
	}()
	ad, req, err := r.open(ctx, status.Intent)
	var lerr ledgerReadError
	switch {
	case errors.As(err, &lerr):
		log.Warn("reading the account's settings from the ledger failed; trying again later", zap.Error(err))
		return later("ledger_error", r.cfg.RetryDelay)
	case err != nil:
		log.Warn("the account's adapter cannot be opened; trying again later", zap.Error(err))
		return later("adapter_unavailable", r.cfg.RetryDelay)
	}

	if h == nil {
		if v, ok := r.fromEvidence(ctx, log, key, status, ad, req); ok {
			return v
		}
		if delay := ad.Capabilities().ReconcileDelay; status.Age < delay {
			return later("waiting_delay", delay-status.Age)
		}
		token, err := ledger.NewClaimToken()
		if err != nil {
			log.Warn("minting a claim token failed; trying again later", zap.Error(err))
			return later("ledger_error", r.cfg.RetryDelay)
		}
		h = &heldLookup{token: token, attempt: status.Intent.Token}
	}
	claim, err := r.claim(ctx, log, key, h.token)
	switch {
	case errors.Is(err, ledger.ErrAlreadyClaimed):
		r.forget(key)
		return done("already_claimed")
	case isRefused(err):
		r.forget(key)
		return done("moved_on")
	case err != nil:
		// Whether the claim committed is unknown: the token is kept, and a later turn asks
		// again with it. The lookup waits until the claim is known to be this reconciler's.
		r.hold(key, h)
		log.Warn("the lookup's claim is still unconfirmed; its token is kept and a later turn asks again", zap.Error(err))
		return later("ledger_error", r.cfg.RetryDelay)
	}
	if claim.Reclaimed {
		log.Info("the claim had committed though its answer was lost; the lookup is this reconciler's")
	}
	// The claim is committed: from here on the lookup is made at most this once, whatever
	// happens to this process.
	r.crashPoint("after-claim")
	lctx, cancel := context.WithTimeout(ctx, r.cfg.LookupTimeout)
	lctx, lookup := r.tracer.Start(lctx, tracing.SpanLookup, trace.WithSpanKind(trace.SpanKindClient))
	lk := ad.Lookup(lctx, req)
	if lookup.IsRecording() {
		lookup.SetAttributes(tracing.Outcome.String(string(lk.Result)), tracing.ObjectID.String(lk.ObjectID))
	}
	lookup.End()
	cancel()
	r.counts.lookup(string(lk.Result))
	r.crashPoint("after-lookup")
	h.claim = claim
	h.result, h.objectID, h.detail = r.judge(ctx, ad, req, lk)
	h.looked = true
	log = log.With(zap.String("lookup", string(lk.Result)))
	return r.record(ctx, log, key, h)
}

// heldLookup is one intent's lookup as this process holds it: the claim token it minted, and,
// once the claim is known to be its own and the lookup made, the claim and the lookup's verdict.
type heldLookup struct {
	token    ledger.ClaimToken
	attempt  identity.AttemptToken // the attempt whose lookup the token claims
	claim    ledger.Reconciliation
	looked   bool
	result   ledger.LookupResult
	objectID string
	detail   map[string]any
}

func (r *Reconciler) heldOf(key identity.DeliveryKey) *heldLookup {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[key]
}

func (r *Reconciler) hold(key identity.DeliveryKey, h *heldLookup) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held[key] = h
}

func (r *Reconciler) forget(key identity.DeliveryKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.held, key)
}

// heldKeys are the intents whose lookup this process holds unconfirmed: the scan works them,
// since the ledger's candidates leave out every claimed lookup.
func (r *Reconciler) heldKeys() []identity.DeliveryKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]identity.DeliveryKey, 0, len(r.held))
	for k := range r.held {
		keys = append(keys, k)
	}
	return keys
}

// fromEvidence publishes the intent on a fenced-out worker's reported success, when its object
// reads back: no lookup is needed then. ok says whether the turn ended here.
func (r *Reconciler) fromEvidence(ctx context.Context, log *zap.Logger, key identity.DeliveryKey, status ledger.ReconcileStatus, ad platform.Adapter, req platform.Request) (Verdict, bool) {
	if !status.ReportedSuccess {
		return Verdict{}, false
	}
	rec, err := r.ledger.Inspect(ctx, key)
	if err != nil {
		log.Warn("reading the evidence failed; trying again later", zap.Error(err))
		return later("ledger_error", r.cfg.RetryDelay), true
	}
	for _, ev := range rec.Evidence {
		if ev.Result != "success" || ev.Reason != ledger.ReasonPublished || ev.ObjectID == "" {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, r.cfg.ReadBackTimeout)
		rctx, read := r.tracer.Start(rctx, tracing.SpanReadBack, trace.WithSpanKind(trace.SpanKindClient))
		confirmed, why, _ := adapters.ReadBack(rctx, ad, req, ev.ObjectID)
		endReadBack(read, ev.ObjectID, confirmed, why)
		cancel()
		if !confirmed {
			log.Info("a fenced-out worker's reported object did not read back; it is not used", zap.String("object_id", ev.ObjectID), zap.String("why", why))
			continue
		}
		if err := r.ledger.ResolveFromEvidence(ctx, key, ev.ObjectID); err != nil {
			if isRefused(err) {
				return done("moved_on"), true
			}
			log.Warn("resolving from evidence failed; trying again later", zap.Error(err))
			return later("ledger_error", r.cfg.RetryDelay), true
		}
		r.publish(ctx, key)
		return done("evidence_found"), true
	}
	return Verdict{}, false
}

// claim claims the lookup with token, asking again with the same token after an error whose
// outcome is unknown (the claim may have committed), for up to RetryDelay.
func (r *Reconciler) claim(ctx context.Context, log *zap.Logger, key identity.DeliveryKey, token ledger.ClaimToken) (ledger.Reconciliation, error) {
	deadline := time.Now().Add(r.cfg.RetryDelay)
	pause := 100 * time.Millisecond
	for {
		claim, err := r.ledger.ClaimReconciliation(ctx, key, token)
		if err == nil || isRefused(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return claim, err
		}
		log.Warn("claiming the lookup failed and the commit's outcome is unknown; asking again with the same claim token", zap.Error(err))
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Second)
	}
}

// record writes the lookup's verdict h holds. A write that cannot be confirmed now stays held,
// and a later turn writes it again: the lookup itself is never made again.
func (r *Reconciler) record(ctx context.Context, log *zap.Logger, key identity.DeliveryKey, h *heldLookup) Verdict {
	state, err := r.resolve(ctx, h.claim, h.result, h.objectID, h.detail)
	switch {
	case err == nil:
	case isRefused(err) || ledger.Permanent(err):
		// The ledger will not take this claim's result (the intent moved on without it: the
		// sweeper parked a stale claim, or an operator acted): a person decides, and needs
		// what the lookup found; never a second lookup.
		r.forget(key)
		log.Error("the ledger refused the lookup's result; a person decides with what it found", zap.String("result", string(h.result)),
			zap.String("object_id", h.objectID), zap.Any("detail", h.detail), zap.Error(err))
		return done("resolve_failed")
	default:
		r.hold(key, h)
		log.Warn("recording the lookup's result failed; it is kept here and recorded on a later turn (the lookup is not made again)", zap.String("result", string(h.result)), zap.Error(err))
		return later("ledger_error", r.cfg.RetryDelay)
	}
	r.forget(key)
	r.publish(ctx, key)
	log.Info("reconciled", zap.String("result", string(h.result)), zap.String("state", string(state)))
	return done("resolved_" + string(h.result))
}

// judge turns the lookup's answer into the ledger's verdict. A found object must read back
// with the intent's text to count as published, or, where the platform reads nothing back,
// be named by its idempotency-status lookup; a not-found proves not-sent only when the
// adapter declares an idempotency-status lookup and that lookup said so.
func (r *Reconciler) judge(ctx context.Context, ad platform.Adapter, req platform.Request, lk platform.Lookup) (ledger.LookupResult, string, map[string]any) {
	detail := map[string]any{"lookup": string(lk.Result)}
	for k, v := range lk.Detail {
		detail[k] = v
	}
	switch lk.Result {
	case platform.Found:
		if lk.ObjectID == "" {
			detail["why"] = "found without an object id"
			return ledger.Unavailable, "", detail
		}
		rctx, cancel := context.WithTimeout(ctx, r.cfg.ReadBackTimeout)
		rctx, read := r.tracer.Start(rctx, tracing.SpanReadBack, trace.WithSpanKind(trace.SpanKindClient))
		confirmed, why, text := adapters.ReadBack(rctx, ad, req, lk.ObjectID)
		endReadBack(read, lk.ObjectID, confirmed, why)
		cancel()
		detail["object_id"] = lk.ObjectID
		detail["read_back"] = text
		if !confirmed && why == adapters.ReadBackUnsupported && ad.Capabilities().StatusLookup {
			// A platform without read-back whose idempotency-status lookup answers for this
			// delivery key, and so for this text, named the object it created: that answer is
			// the account's proof of the success.
			return ledger.Found, lk.ObjectID, detail
		}
		if !confirmed {
			// Something exists under the request's key, but not provably this intent's text:
			// a human decides.
			detail["why"] = "the found object did not read back: " + why
			return ledger.Unavailable, "", detail
		}
		return ledger.Found, lk.ObjectID, detail
	case platform.NotFound:
		if !lk.ProvenNotSent {
			return ledger.NotFound, "", detail
		}
		// Not-sent is retryable by policy, so only a lookup the adapter declares can prove it.
		if !ad.Capabilities().StatusLookup {
			detail["why"] = "proven not-sent from an adapter that declares no idempotency-status lookup: it proves nothing"
			return ledger.NotFound, "", detail
		}
		return ledger.ProvenNotSent, "", detail
	default:
		return ledger.Unavailable, "", detail
	}
}

// endReadBack ends a read-back's span with its verdict.
func endReadBack(span trace.Span, objectID string, confirmed bool, why string) {
	if span.IsRecording() {
		outcome := "confirmed"
		if !confirmed {
			outcome = "not_confirmed"
			span.SetAttributes(tracing.Reason.String(why))
		}
		span.SetAttributes(tracing.ObjectID.String(objectID), tracing.Outcome.String(outcome))
	}
	span.End()
}

// resolve records the lookup's result. Only the ledger write is retried, never the lookup.
func (r *Reconciler) resolve(ctx context.Context, claim ledger.Reconciliation, result ledger.LookupResult, objectID string, detail map[string]any) (ledger.State, error) {
	deadline := time.Now().Add(r.cfg.RetryDelay)
	pause := 100 * time.Millisecond
	for {
		state, err := r.ledger.ResolveReconciliation(ctx, claim, result, objectID, detail)
		if err == nil || isRefused(err) || ledger.Permanent(err) || time.Now().After(deadline) {
			return state, err
		}
		r.log.Warn("recording the lookup's result failed and the commit's outcome is unknown; writing it again (not the lookup)", zap.Stringer("key", claim.Key), zap.Error(err))
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Second)
	}
}

// open returns the adapter of the intent's account and the platform's view of the intent.
func (r *Reconciler) open(ctx context.Context, in ledger.Intent) (platform.Adapter, platform.Request, error) {
	req, err := adapters.RequestOf(in)
	if err != nil {
		return nil, req, err
	}
	ad, err := r.adapterOf(ctx, in.Account)
	return ad, req, err
}

// accountTTL is how long a reconciler works with an account's configuration before it reads it
// again: a ledger read spared per intent, against settings up to a second old for the delay, the
// lookup and its read-back. A change of settings takes effect within it, as in a process that
// read them a second earlier.
const accountTTL = time.Second

type readAccount struct {
	account ledger.Account
	at      time.Time
}

// adapterOf returns the adapter of account, configured as the ledger said at most accountTTL
// ago.
func (r *Reconciler) adapterOf(ctx context.Context, account string) (platform.Adapter, error) {
	r.mu.Lock()
	c, ok := r.accounts[account]
	r.mu.Unlock()
	if !ok || time.Since(c.at) > accountTTL {
		gates, err := r.ledger.Gates(ctx, []string{account})
		if err != nil {
			return nil, ledgerReadError{err}
		}
		g, ok := gates[account]
		if !ok {
			return nil, fmt.Errorf("account %q is not configured", account)
		}
		c = readAccount{account: g.Account, at: time.Now()}
		r.mu.Lock()
		r.accounts[account] = c
		r.mu.Unlock()
	}
	return r.adapters.Open(c.account)
}

// untilDue is how long an intent of account, indeterminate since, still has to wait out the
// account's reconcile delay by this process's clock: a turn before that would only read the
// ledger to learn it must wait. Zero when the account cannot be opened (the turn says why).
// The turn that is due decides by the database's clock, so a clock that differs only moves the
// wait, and by no more than the delay.
func (r *Reconciler) untilDue(ctx context.Context, account string, since time.Time) time.Duration {
	ad, err := r.adapterOf(ctx, account)
	if err != nil {
		return 0
	}
	delay := ad.Capabilities().ReconcileDelay
	return min(max(delay-time.Since(since), 0), delay)
}

// publish publishes the intent's transitions; a failure leaves them to the outbox's slow path.
// Intents resolved while a round is under way are published together by the next round, so a
// busy reconciler publishes in batches; publish returns once a round that started after key's
// resolution has ended.
func (r *Reconciler) publish(ctx context.Context, key identity.DeliveryKey) {
	r.mu.Lock()
	r.unpublished = append(r.unpublished, key)
	r.mu.Unlock()
	r.publishing.Lock()
	defer r.publishing.Unlock()
	r.mu.Lock()
	keys := r.unpublished
	r.unpublished = nil
	r.mu.Unlock()
	if len(keys) == 0 {
		return // a round that started after key was added has published it
	}
	_ = r.relay.AfterCommit(ctx, keys)
}

// ledgerReadError is a failed read of the ledger on the way to an account's adapter: the
// database's trouble, which no change of the account's configuration would fix.
type ledgerReadError struct{ err error }

func (e ledgerReadError) Error() string { return "reading the account's settings: " + e.err.Error() }
func (e ledgerReadError) Unwrap() error { return e.err }

func isRefused(err error) bool {
	var refused *ledger.RefusedError
	return errors.As(err, &refused)
}
