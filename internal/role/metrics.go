package role

import (
	"context"
	"runtime"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/atmost/atmost/internal/version"
	"github.com/atmost/atmost/pkg/ledger"
)

// outboxCollector is atmost_relay_lag_seconds and atmost_outbox_rows, read from the ledger
// once per scrape, within a second.
type outboxCollector struct{ ledger *ledger.Ledger }

var (
	relayLagDesc = prometheus.NewDesc("atmost_relay_lag_seconds",
		"Age of the oldest transition waiting in the outbox, by the database's clock (0 when it is empty).", nil, nil)
	outboxRowsDesc = prometheus.NewDesc("atmost_outbox_rows", "Transitions waiting in the outbox for a relay.", nil, nil)
)

func (c outboxCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- relayLagDesc
	ch <- outboxRowsDesc
}

func (c outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rows, oldest, err := c.ledger.OutboxLag(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(relayLagDesc, err)
		ch <- prometheus.NewInvalidMetric(outboxRowsDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(relayLagDesc, prometheus.GaugeValue, oldest.Seconds())
	ch <- prometheus.MustNewConstMetric(outboxRowsDesc, prometheus.GaugeValue, float64(rows))
}

// ConsumerPending is a gauge of the messages waiting for consumer c on its stream, read from
// JetStream at each scrape within a second (-1 when JetStream did not answer).
func ConsumerPending(name, help string, c jetstream.Consumer) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		info, err := c.Info(ctx)
		if err != nil {
			return -1
		}
		return float64(info.NumPending)
	})
}

// buildInfo is atmost_build_info: always 1, its labels say which build runs, so a dashboard can
// tell the versions of a pool apart during a rollout.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "atmost_build_info",
		Help: "The build of this process (always 1): its version, VCS revision and Go version."}, []string{"version", "revision", "go_version"})
	g.WithLabelValues(version.String(), version.Revision(), runtime.Version()).Set(1)
	return g
}
