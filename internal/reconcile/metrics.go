package reconcile

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/atmost/atmost/pkg/ledger"
)

// counters are what a Reconciler counts, exported as Prometheus metrics.
type counters struct {
	turns   *prometheus.CounterVec
	lookups *prometheus.CounterVec
	scanned prometheus.Counter
}

func newCounters() *counters {
	return &counters{
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_reconcile_turns_total",
			Help: "Intents taken up, by what became of them: resolved_<result>, evidence_found, waiting_delay, already_claimed, not_indeterminate, ..."}, []string{"result"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_reconcile_lookups_total",
			Help: "Reconciliation lookups made (at most one per indeterminate intent), by what the platform answered: found, not_found, unavailable."}, []string{"answer"}),
		scanned: prometheus.NewCounter(prometheus.CounterOpts{Name: "atmost_reconcile_scanned_total",
			Help: "Indeterminate intents the safety-net scan took up: their lookup was still unclaimed --scan-after past their transition, so the event path missed them."}),
	}
}

func (c *counters) turn(result string)   { c.turns.WithLabelValues(result).Inc() }
func (c *counters) lookup(answer string) { c.lookups.WithLabelValues(answer).Inc() }

// Collectors are the reconciler's metrics, for a role's registry.
func (r *Reconciler) Collectors() []prometheus.Collector {
	return []prometheus.Collector{r.counts.turns, r.counts.lookups, r.counts.scanned, backlogCollector{r.ledger}}
}

// backlogCollector reads how far reconciliation is behind from the ledger at each scrape: the
// indeterminate intents whose lookup is not claimed yet and how long the oldest has waited.
// It is the ledger's view, so every reconciler reports the same figures and they hold while no
// reconciler runs at all.
type backlogCollector struct{ ledger *ledger.Ledger }

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
