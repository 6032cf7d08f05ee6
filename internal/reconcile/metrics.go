package reconcile

import (
	"github.com/prometheus/client_golang/prometheus"
)

// counters are what a Reconciler counts, exported as Prometheus metrics.
type counters struct {
	turns   *prometheus.CounterVec
	lookups *prometheus.CounterVec
}

func newCounters() *counters {
	return &counters{
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_reconcile_turns_total",
			Help: "Intents taken up, by what became of them: resolved_<result>, evidence_found, waiting_delay, already_claimed, not_indeterminate, ..."}, []string{"result"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_reconcile_lookups_total",
			Help: "Reconciliation lookups made (at most one per indeterminate intent), by what the platform answered: found, not_found, unavailable."}, []string{"answer"}),
	}
}

func (c *counters) turn(result string)   { c.turns.WithLabelValues(result).Inc() }
func (c *counters) lookup(answer string) { c.lookups.WithLabelValues(answer).Inc() }

// Collectors are the reconciler's metrics, for a role's registry.
func (r *Reconciler) Collectors() []prometheus.Collector {
	return []prometheus.Collector{r.counts.turns, r.counts.lookups}
}
