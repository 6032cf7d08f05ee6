// Package sweep is the sweeper role: the recovery half that moves what nobody else will. Each
// pass expires leases (one way only), publishes work again for pending intents whose work item
// may be lost, retries failed intents as the policy allows and at its rate, parks indeterminate
// intents no reconciler will finish, and drains the outbox. Any number of sweepers may run at
// once: every change is a guarded ledger statement, so each row moves once.
package sweep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// Config tunes a Sweeper. The zero value of every field means its default.
type Config struct {
	// Interval is the pause between passes. Default DefaultInterval.
	Interval time.Duration
	// Batch bounds the rows one duty looks at in one pass. Default DefaultBatch.
	Batch int
	// StrandedAfter is how long a pending intent rests unclaimed before its work is published
	// again. Keep it above the dispatcher's gate delay and ack wait: a work item that is only
	// waiting is not lost. Default DefaultStrandedAfter.
	StrandedAfter time.Duration
	// LookupStale is how long a claimed reconciliation lookup may stay unresolved before the
	// intent is parked for a human (its reconciler died after the claim; a second lookup is
	// never made). Keep it far above the reconciler's lookup timeout. Default DefaultLookupStale.
	LookupStale time.Duration
	// UnreconciledAfter is how long an indeterminate intent may wait with no lookup claimed
	// before it is parked for a human. Default DefaultUnreconciledAfter.
	UnreconciledAfter time.Duration
	// NoDrain turns off publishing the outbox every pass (the relay's slow path), for when
	// another role does it. The zero value drains.
	NoDrain bool
	// Platforms opens accounts' adapters, sending nothing, for atmost_account_waiting_intents:
	// an account whose adapter does not open holds its intents (adapter_unavailable). Default
	// the adapters built into atmost.
	Platforms platform.Registry
	// AlertURL, when set, is where every alert is POSTed too (ATMOST_ALERT_URL), signed with
	// AlertSecret (ATMOST_ALERT_SECRET, required with it) in the Atmost-Signature header;
	// AlertQueue bounds the alerts waiting for it (default DefaultAlertQueue): beyond, one is dropped and
	// counted, never waited for.
	AlertURL    string
	AlertSecret string
	AlertQueue  int
	// Logger; nil means no logging.
	Logger *zap.Logger
}

// The defaults of the configuration's fields (the zero value of a field means its default).
const (
	DefaultInterval          = 5 * time.Second
	DefaultBatch             = 1000
	DefaultStrandedAfter     = 10 * time.Minute
	DefaultLookupStale       = 10 * time.Minute
	DefaultUnreconciledAfter = 24 * time.Hour
	DefaultAlertQueue        = 1000
)

func (c Config) withDefaults() Config {
	c.Interval = cmp.Or(c.Interval, DefaultInterval)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.StrandedAfter = cmp.Or(c.StrandedAfter, DefaultStrandedAfter)
	c.LookupStale = cmp.Or(c.LookupStale, DefaultLookupStale)
	c.UnreconciledAfter = cmp.Or(c.UnreconciledAfter, DefaultUnreconciledAfter)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Platforms == nil {
		c.Platforms = adapters.Registered()
	}
	c.AlertQueue = cmp.Or(c.AlertQueue, DefaultAlertQueue)
	return c
}

func (c Config) validate() error {
	for name, v := range map[string]time.Duration{"interval": c.Interval, "stranded-after": c.StrandedAfter,
		"lookup-stale": c.LookupStale, "unreconciled-after": c.UnreconciledAfter} {
		if v < 0 {
			return fmt.Errorf("sweep %s %s: must be positive", name, v)
		}
	}
	if c.Batch < 0 {
		return fmt.Errorf("sweep batch %d: must be positive", c.Batch)
	}
	if c.AlertURL != "" && c.AlertSecret == "" {
		return errors.New("sweep: an alert URL needs its secret (ATMOST_ALERT_SECRET): alerts are signed")
	}
	if c.AlertQueue < 0 {
		return fmt.Errorf("sweep alert queue %d: must be positive", c.AlertQueue)
	}
	return nil
}

// Report is what one pass did.
type Report struct {
	Abandoned       int // pre-authorization leases expired: nothing was sent, the intents are free
	LeaseExpired    int // authorizations expired: indeterminate, never resent
	Republished     int // work items published again for stranded pending intents
	Woken           int // work items published again for intents whose held account may go on
	Retried         int // failed intents reopened by the policy
	Exhausted       int // failed intents parked at their attempt cap
	RetryHeld       int // due retries waiting for their account's rate
	LookupLost      int // indeterminate intents parked: their claimed lookup never resolved
	NeverReconciled int // indeterminate intents parked: no lookup claimed in time
	Healed          int // accounts held for unknown outcomes served again, their unknowns reconciled
	Drained         int // outbox rows published by the slow path
	Took            time.Duration
}

// Sweeper runs the passes.
type Sweeper struct {
	ledger Ledger
	relay  *relay.Relay
	js     jetstream.JetStream
	cfg    Config
	log    *zap.Logger
	counts *counters
	alerts *alerter
}

// Ledger is what the sweeper does with the ledger: expire leases, find stranded work, retry what
// policy allows, park what no reconciler will finish, and count what has not been published and
// what waits for its account, heal what was reconciled, and read what it alerts on.
// *ledger.Ledger is one.
type Ledger interface { //nolint:interfacebloat // every pass of the sweeper, named in one place as each role's Ledger is
	ExpireLeases(ctx context.Context, max int) (ledger.Expired, error)
	StrandedPending(ctx context.Context, idle time.Duration, max int) ([]ledger.Stranded, error)
	HeldToWake(ctx context.Context, recent time.Duration, max int) ([]ledger.Waking, error)
	RetryDue(ctx context.Context, max int) (ledger.RetryPass, error)
	Gates(ctx context.Context, accounts []string) (map[string]ledger.Gate, error)
	ParkUnreconciled(ctx context.Context, stale, unclaimed time.Duration, max int) (ledger.Unreconciled, error)
	Outstanding(ctx context.Context) (map[ledger.State]int64, error)
	ReconcileBacklog(ctx context.Context) (ledger.ReconcileBacklog, error)
	Accounts(ctx context.Context) ([]ledger.Account, error)
	Holds(ctx context.Context, accounts []string) (map[string]ledger.Hold, error)
	PendingCounts(ctx context.Context, accounts []string) (map[string]int64, error)
	HealReconciled(ctx context.Context) ([]string, error)
	HealthChangesSince(ctx context.Context, since time.Time, max int) ([]ledger.HealthRecord, error)
	ParkedSince(ctx context.Context, since time.Time, max int) ([]ledger.ParkedRecord, error)
	AccountHealth(ctx context.Context, accounts ...string) ([]ledger.Health, error)
}

// New returns a sweeper over l, publishing through rel and js.
func New(l Ledger, rel *relay.Relay, js jetstream.JetStream, cfg Config) (*Sweeper, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var nc *nats.Conn
	if js != nil {
		nc = js.Conn()
	}
	return &Sweeper{ledger: l, relay: rel, js: js, cfg: cfg, log: cfg.Logger, counts: newCounters(), alerts: newAlerter(nc, cfg, cfg.Logger)}, nil
}

// Run makes a pass every Interval until ctx ends. A failed pass is logged and the next one
// tries again: every duty resumes from what the ledger holds.
func (s *Sweeper) Run(ctx context.Context) error {
	if s.cfg.AlertURL != "" {
		go s.alerts.run(ctx)
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		r, err := s.Pass(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.Warn("sweep pass failed; the next pass resumes from the ledger", zap.Error(err))
		case r.changed():
			s.log.Info("sweep pass", zap.Int("abandoned", r.Abandoned), zap.Int("lease_expired", r.LeaseExpired),
				zap.Int("republished", r.Republished), zap.Int("woken", r.Woken), zap.Int("retried", r.Retried), zap.Int("exhausted", r.Exhausted),
				zap.Int("retry_held", r.RetryHeld), zap.Int("lookup_lost", r.LookupLost), zap.Int("never_reconciled", r.NeverReconciled),
				zap.Int("healed", r.Healed), zap.Int("drained", r.Drained), zap.Duration("took", r.Took))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (r Report) changed() bool {
	return r.Abandoned+r.LeaseExpired+r.Republished+r.Woken+r.Retried+r.Exhausted+r.LookupLost+r.NeverReconciled+r.Healed > 0
}

// heal serves again the accounts held for unknown outcomes whose unknowns are reconciled down to
// their policy's threshold (docs/design.md#account-health): the one hold no probe ends.
func (s *Sweeper) heal(ctx context.Context, r *Report) error {
	healed, err := s.ledger.HealReconciled(ctx)
	r.Healed = len(healed)
	for _, account := range healed {
		s.log.Info("account served again: its unknown outcomes are reconciled", zap.String("account", account))
	}
	return err
}

// Pass runs every duty once and publishes the transitions it made. Each duty runs even when
// an earlier one failed; the errors are joined.
func (s *Sweeper) Pass(ctx context.Context) (Report, error) {
	start := time.Now()
	var r Report
	var errs []error
	if err := s.expire(ctx, &r); err != nil {
		errs = append(errs, fmt.Errorf("expire leases: %w", err))
	}
	if err := s.republish(ctx, &r); err != nil {
		errs = append(errs, fmt.Errorf("republish stranded work: %w", err))
	}
	if err := s.wake(ctx, &r); err != nil {
		errs = append(errs, fmt.Errorf("wake held work: %w", err))
	}
	if err := s.retry(ctx, &r); err != nil {
		errs = append(errs, fmt.Errorf("retry failed intents: %w", err))
	}
	if err := s.park(ctx, &r); err != nil {
		errs = append(errs, fmt.Errorf("park unreconciled intents: %w", err))
	}
	if err := s.heal(ctx, &r); err != nil {
		errs = append(errs, fmt.Errorf("heal reconciled accounts: %w", err))
	}
	if err := s.alerts.tell(ctx, s.ledger, s.cfg.Batch); err != nil {
		errs = append(errs, fmt.Errorf("tell alerts: %w", err))
	}
	if !s.cfg.NoDrain {
		n, err := s.relay.DrainSettled(ctx)
		r.Drained = n
		if err != nil {
			errs = append(errs, fmt.Errorf("drain the outbox: %w", err))
		}
	}
	r.Took = time.Since(start)
	s.counts.pass(r, len(errs) == 0)
	return r, errors.Join(errs...)
}

// publish publishes the transitions of keys; a failure leaves them in the outbox for the
// slow path, so it is reported, never fatal.
func (s *Sweeper) publish(ctx context.Context, keys []identity.DeliveryKey) error {
	if len(keys) == 0 {
		return nil
	}
	return s.relay.AfterCommit(ctx, keys)
}

// ExpireBatches bounds the batches of expired leases one pass ends. An expired claim holds an
// intent nobody works on, so a pass goes on past one batch rather than leave the rest for the
// next pass an Interval later; the bound keeps a backlog larger than that (a fleet of
// dispatchers lost at once) from holding the pass's other duties back, the rest of it waiting
// for the next pass.
const ExpireBatches = 10

// expire ends expired leases a batch at a time until a batch comes back short (none are left)
// or ExpireBatches batches were taken.
func (s *Sweeper) expire(ctx context.Context, r *Report) error {
	for range ExpireBatches {
		n, err := s.ledger.ExpireLeases(ctx, s.cfg.Batch)
		if err != nil {
			return err
		}
		r.Abandoned += n.Abandoned
		r.LeaseExpired += n.Indeterminate
		if err := s.publish(ctx, n.Changed); err != nil {
			return err
		}
		if len(n.Changed) < s.cfg.Batch {
			return nil
		}
	}
	return nil
}

// republish publishes a work item again for each pending intent that rested unclaimed past
// StrandedAfter, except those of accounts a kill switch or a revoked credential holds (their
// work is waiting, not lost). The message id changes each StrandedAfter round, so JetStream
// never drops it as a duplicate of the original, while sweepers of one round publish one copy.
// A work item is only a hint: a second copy of live work is acknowledged and ignored by the
// dispatcher (the intent is claimed or no longer pending).
func (s *Sweeper) republish(ctx context.Context, r *Report) error {
	stranded, err := s.ledger.StrandedPending(ctx, s.cfg.StrandedAfter, s.cfg.Batch)
	if err != nil || len(stranded) == 0 {
		return err
	}
	var accounts []string
	seen := map[string]bool{}
	for _, st := range stranded {
		if !seen[st.Account] {
			seen[st.Account] = true
			accounts = append(accounts, st.Account)
		}
	}
	gates, err := s.ledger.Gates(ctx, accounts)
	if err != nil {
		return err
	}
	round := time.Now().UnixNano() / int64(s.cfg.StrandedAfter)
	var items []republished
	for _, st := range stranded {
		if g, ok := gates[st.Account]; !ok || g.Refusal() != "" {
			continue
		}
		items = append(items, republished{st, round})
	}
	n, err := s.publishWork(ctx, items)
	r.Republished += n
	return err
}

// wake publishes again the work items the dispatcher acknowledged while their accounts held
// (docs/design.md#held-work-leaves-the-queue): every intent that waited through the hold of an
// account that serves again (within StrandedAfter of its return; past it, republish finds
// them), and one intent of each account whose probe is due, to be the probe. Its message id's
// round is the account's health version: one copy per intent and heal, however many passes
// find it before it is claimed.
func (s *Sweeper) wake(ctx context.Context, r *Report) error {
	waking, err := s.ledger.HeldToWake(ctx, s.cfg.StrandedAfter, s.cfg.Batch)
	if err != nil || len(waking) == 0 {
		return err
	}
	items := make([]republished, len(waking))
	for i, w := range waking {
		items[i] = republished{w.Stranded, -w.Wake}
	}
	n, err := s.publishWork(ctx, items)
	r.Woken += n
	return err
}

// republished is a pending intent's work item to publish again, with its message id's round.
type republished struct {
	ledger.Stranded
	round int64
}

// publishWork publishes the work items of items and returns how many JetStream acknowledged.
func (s *Sweeper) publishWork(ctx context.Context, items []republished) (int, error) {
	var futures []jetstream.PubAckFuture
	for _, st := range items {
		w := events.WorkItem{V: events.Version, DeliveryKey: st.Key, Account: st.Account, Event: events.NewID(st.Key, st.Seq)}
		data := w.Marshal()
		header := nats.Header{jetstream.MsgIDHeader: []string{w.RepublishMsgID(st.round)}}
		if st.TraceParent != "" {
			header[tracecontext.Header] = []string{st.TraceParent} // the dispatcher goes on with the intent's trace
		}
		f, err := s.js.PublishMsgAsync(&nats.Msg{Subject: w.Subject(), Data: data, Header: header})
		if err != nil {
			return 0, err
		}
		futures = append(futures, f)
	}
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	n := 0
	for _, f := range futures {
		select {
		case <-f.Ok():
			n++
		case err := <-f.Err():
			return n, err
		case <-timeout.C:
			return n, errors.New("JetStream did not acknowledge the republished work in 10s")
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
	return n, nil
}

func (s *Sweeper) retry(ctx context.Context, r *Report) error {
	pass, err := s.ledger.RetryDue(ctx, s.cfg.Batch)
	r.Retried += pass.Retried
	r.Exhausted += pass.Exhausted
	r.RetryHeld += pass.Held
	if err != nil {
		return err
	}
	return s.publish(ctx, pass.Changed)
}

func (s *Sweeper) park(ctx context.Context, r *Report) error {
	n, err := s.ledger.ParkUnreconciled(ctx, s.cfg.LookupStale, s.cfg.UnreconciledAfter, s.cfg.Batch)
	if err != nil {
		return err
	}
	r.LookupLost += n.LookupLost
	r.NeverReconciled += n.NeverReconciled
	return s.publish(ctx, n.Changed)
}
