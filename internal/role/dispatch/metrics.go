package dispatch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are what a Dispatcher counts, exported as Prometheus metrics.
type counters struct {
	works       *prometheus.CounterVec
	sends       *prometheus.CounterVec
	unsents     *prometheus.CounterVec
	readBacks   *prometheus.CounterVec
	completions *prometheus.CounterVec
	sendSeconds prometheus.Histogram
}

func newCounters() *counters {
	return &counters{
		works: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_dispatch_work_total",
			Help: "Work items handled, by what became of them (completed, not_pending, gated_<reason>, ...)."}, []string{"result"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_dispatch_sends_total",
			Help: "Sends by transport outcome: success, not_sent, unknown."}, []string{"outcome"}),
		unsents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_dispatch_unsent_total",
			Help: "Authorized attempts completed as not sent before their first byte, by the step that stopped them: witness, deadline, shutdown."}, []string{"step"}),
		readBacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_dispatch_readback_failures_total",
			Help: "Read-backs that did not confirm a claimed success, by why: mismatch, missing, unavailable."}, []string{"why"}),
		completions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_dispatch_completions_total",
			Help: "Outcomes recorded, by the state they led to (a fenced-out outcome is evidence only: work result completion_fenced)."}, []string{"state"}),
		sendSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "atmost_dispatch_send_seconds",
			Help: "Duration of one send, from the first attempt to connect to the classified outcome.", Buckets: prometheus.DefBuckets}),
	}
}

func (c *counters) work(result string)              { c.works.WithLabelValues(result).Inc() }
func (c *counters) send(outcome string)             { c.sends.WithLabelValues(outcome).Inc() }
func (c *counters) unsent(step string)              { c.unsents.WithLabelValues(step).Inc() }
func (c *counters) readBack(why string)             { c.readBacks.WithLabelValues(why).Inc() }
func (c *counters) completion(state string)         { c.completions.WithLabelValues(state).Inc() }
func (c *counters) sendDuration(took time.Duration) { c.sendSeconds.Observe(took.Seconds()) }

// Collectors are the dispatcher's metrics, for a role's registry.
func (d *Dispatcher) Collectors() []prometheus.Collector {
	return []prometheus.Collector{d.counts.works, d.counts.sends, d.counts.unsents, d.counts.readBacks, d.counts.completions, d.counts.sendSeconds}
}
