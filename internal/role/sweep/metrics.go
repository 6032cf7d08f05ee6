package sweep

import (
	"context"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// counters are what a Sweeper counts, exported as Prometheus metrics.
type counters struct {
	passes  *prometheus.CounterVec
	seconds prometheus.Histogram
	changes *prometheus.CounterVec
}

func newCounters() *counters {
	return &counters{
		passes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_sweep_passes_total",
			Help: "Sweep passes, by result: ok, failed (a duty failed; the next pass resumes)."}, []string{"result"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "atmost_sweep_pass_seconds",
			Help: "Duration of one sweep pass, every duty included.", Buckets: prometheus.DefBuckets}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_sweep_changes_total",
			Help: "What the sweeper did, by duty: lease_abandoned, lease_expired, work_republished, work_woken, retried, exhausted, retry_held, lookup_lost, never_reconciled, healed, outbox_drained."},
			[]string{"duty"}),
	}
}

func (c *counters) pass(r Report, ok bool) {
	result := "ok"
	if !ok {
		result = "failed"
	}
	c.passes.WithLabelValues(result).Inc()
	c.seconds.Observe(r.Took.Seconds())
	for duty, n := range map[string]int{"lease_abandoned": r.Abandoned, "lease_expired": r.LeaseExpired, "work_republished": r.Republished, "work_woken": r.Woken,
		"retried": r.Retried, "exhausted": r.Exhausted, "retry_held": r.RetryHeld, "lookup_lost": r.LookupLost,
		"never_reconciled": r.NeverReconciled, "healed": r.Healed, "outbox_drained": r.Drained} {
		c.changes.WithLabelValues(duty).Add(float64(n))
	}
}

// Collectors are the sweeper's metrics, for a role's registry.
func (s *Sweeper) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.counts.passes, s.counts.seconds, s.counts.changes, intentsCollector{s.ledger}, backlogCollector{s.ledger},
		waitingCollector{s.ledger, s.cfg.Platforms}, healthCollector{s.ledger}, s.alerts.alerts, s.alerts.webhook}
}

// healthCollector is the gauge atmost_account_health{account,state}: 1 for each account's
// health state (serving, holding, probing), 0 for the other two, read from the ledger at each
// scrape (docs/design.md#account-health).
type healthCollector struct{ ledger Ledger }

var accountHealthDesc = prometheus.NewDesc("atmost_account_health",
	"An account's health: 1 for its state (serving, holding: its platform cannot take anything now and its intents wait; probing: one intent is let through), 0 for the others. Read from the ledger at each scrape.",
	[]string{"account", "state"}, nil)

func (c healthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- accountHealthDesc }

func (c healthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	healths, err := c.ledger.AccountHealth(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(accountHealthDesc, err)
		return
	}
	for _, h := range healths {
		for _, st := range []ledger.HealthState{ledger.Serving, ledger.Holding, ledger.Probing} {
			v := 0.0
			if h.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(accountHealthDesc, prometheus.GaugeValue, v, h.Account, string(st))
		}
	}
}

// waitingCollector is the gauge atmost_account_waiting_intents{account,cause}: for each account
// that cannot be served now, why (adapters.Waits: kill_switch, account_disabled,
// credential_revoked, adapter_unavailable) and how many of its intents are pending, none of
// them opening an attempt. It is read from the ledger at each scrape; the adapters are opened
// from the registry, sending nothing, with this process's environment for their credential
// references. An account that is served is not listed.
type waitingCollector struct {
	ledger    Ledger
	platforms platform.Registry
}

var accountWaitingDesc = prometheus.NewDesc("atmost_account_waiting_intents",
	"Pending intents of an account that cannot be served now, by why (kill_switch, account_disabled, credential_revoked, adapter_unavailable): they wait, no attempt opened. Read from the ledger at each scrape; accounts that are served are not listed.",
	[]string{"account", "cause"}, nil)

func (c waitingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- accountWaitingDesc }

func (c waitingCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	waits, counts, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(accountWaitingDesc, err)
		return
	}
	for account, w := range waits {
		ch <- prometheus.MustNewConstMetric(accountWaitingDesc, prometheus.GaugeValue, float64(counts[account]), account, w.Cause)
	}
}

func (c waitingCollector) read(ctx context.Context) (map[string]adapters.Wait, map[string]int64, error) {
	accounts, err := c.ledger.Accounts(ctx)
	if err != nil {
		return nil, nil, err
	}
	waits, err := adapters.Waits(ctx, c.ledger, c.platforms, os.LookupEnv, accounts)
	if err != nil || len(waits) == 0 {
		return waits, nil, err
	}
	held := make([]string, 0, len(waits))
	for account := range waits {
		held = append(held, account)
	}
	counts, err := c.ledger.PendingCounts(ctx, held)
	return waits, counts, err
}

// intentsCollector is the gauge atmost_intents{state} of the intents not published: those that
// may still move and those that wait for a person (parked). It is read from the ledger at each
// scrape, in one statement, through the indexes that hold only them; published intents, the
// ledger's bulk, are not counted.
type intentsCollector struct{ ledger Ledger }

var intentsDesc = prometheus.NewDesc("atmost_intents",
	"Intents not published, by state (pending, authorized, failed, indeterminate, parked), read from the ledger at each scrape.", []string{"state"}, nil)

func (c intentsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- intentsDesc }

func (c intentsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := c.ledger.Outstanding(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(intentsDesc, err)
		return
	}
	for st, n := range counts {
		ch <- prometheus.MustNewConstMetric(intentsDesc, prometheus.GaugeValue, float64(n), string(st))
	}
}

// backlogCollector reads how far reconciliation is behind from the ledger at each scrape: the
// indeterminate intents whose one lookup is not claimed yet and how long the oldest has waited.
// The sweeper exports it, not the reconciler, so it reads true while no reconciler runs, which
// is one of the things it is there to show.
type backlogCollector struct{ ledger Ledger }

var (
	waitingDesc = prometheus.NewDesc("atmost_reconcile_waiting_intents",
		"Indeterminate intents whose one lookup is not claimed yet (waiting out the reconcile delay, or for a reconciler), read from the ledger at each scrape.", nil, nil)
	oldestDesc = prometheus.NewDesc("atmost_reconcile_oldest_waiting_seconds",
		"How long the oldest indeterminate intent whose lookup is not claimed has been indeterminate (0 when none), read from the ledger at each scrape; alert when it passes the largest reconcile delay by much.", nil, nil)
)

func (c backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- waitingDesc
	ch <- oldestDesc
}

func (c backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	b, err := c.ledger.ReconcileBacklog(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(waitingDesc, err)
		ch <- prometheus.NewInvalidMetric(oldestDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(b.Waiting))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, b.Oldest.Seconds())
}
