package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"
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
			Help: "Indeterminate intents the safety-net scan resolved: due, and their lookup still unclaimed --scan-after past their transition. After a reconciler outage longer than --scan-after it takes up what waited; otherwise an increase means indeterminate events went missing."}),
	}
}

func (c *counters) turn(result string)   { c.turns.WithLabelValues(result).Inc() }
func (c *counters) lookup(answer string) { c.lookups.WithLabelValues(answer).Inc() }

// Collectors are the reconciler's metrics, for a role's registry.
func (r *Reconciler) Collectors() []prometheus.Collector {
	return []prometheus.Collector{r.counts.turns, r.counts.lookups, r.counts.scanned}
}
