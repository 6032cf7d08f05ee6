package role

import (
	"context"
	"net"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/serve"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/internal/version"
	"github.com/atmost/atmost/pkg/ledger"
)

// Deps are what every role runs on: the ledger's pool, the NATS connection with atmost's
// streams in place, the ledger acting as the role, the relay of its outbox, the registry its
// metrics go to (the relay's and the ledger's are registered already), and its tracer
// provider (the no-op one unless Common.Traces exports).
type Deps struct {
	Pool     *pgxpool.Pool
	NATS     *nats.Conn
	JS       jetstream.JetStream
	Ledger   *ledger.Ledger
	Relay    *relay.Relay
	Registry *prometheus.Registry
	Tracer   tracing.Provider
}

// Start connects a role: it sets the collector's target (TuneGC), then connects PostgreSQL
// (lazily), NATS (waiting with backoff), the streams (created idempotently; an incompatible
// one stops it), the ledger acting as the process (Common.Actor), and the relay. Close releases what
// it opened.
func Start(ctx context.Context, name string, c Common, relayCfg relay.Config, log *zap.Logger) (*Deps, error) {
	TuneGC()
	iso, err := c.IsoLevel()
	if err != nil {
		return nil, err
	}
	pool, err := OpenPool(ctx, c.DatabaseURL)
	if err != nil {
		return nil, err
	}
	d := &Deps{Pool: pool}
	WarnWithoutAutovacuum(ctx, pool, log)
	if d.Tracer, err = tracing.NewProvider(ctx, name, c.Traces, log); err != nil {
		d.Close()
		return nil, err
	}
	if d.NATS, err = ConnectNATS(ctx, name, c.NATSURL, log); err != nil {
		d.Close()
		return nil, err
	}
	if d.JS, err = jetstream.New(d.NATS); err != nil {
		d.Close()
		return nil, err
	}
	if err := Retry(ctx, log, "create streams", func() error {
		return streams.Ensure(ctx, d.NATS, d.JS, streams.Config{Replicas: c.Replicas})
	}); err != nil {
		d.Close()
		return nil, err
	}
	if d.Ledger, err = ledger.New(pool, ledger.Config{Actor: c.Actor(name), Isolation: iso, Logger: log}); err != nil {
		d.Close()
		return nil, err
	}
	relayCfg.Logger = log
	d.Relay = relay.New(d.Ledger, d.JS, relayCfg)
	d.Registry = serve.NewRegistry()
	d.Registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "atmost_relay_events_published_total",
			Help: "Transitions this process published and removed from the outbox."}, func() float64 { return float64(d.Relay.Published()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "atmost_ledger_transaction_restarts_total",
			Help: "Ledger transactions restarted after a serialization failure or deadlock."}, func() float64 { return float64(d.Ledger.Retries()) }),
		outboxCollector{d.Ledger},
		buildInfo())
	d.Registry.MustRegister(d.Relay.Collectors()...)
	return d, nil
}

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

// Serve serves /healthz, /readyz (PostgreSQL and NATS) and /metrics on addr until ctx ends.
func (d *Deps) Serve(ctx context.Context, addr string, log *zap.Logger) (net.Addr, error) {
	return serve.Listen(ctx, addr, serve.Handler(d.Registry, Checks(d.Pool, d.NATS)), log)
}

// Close drains the NATS connection, removes the outbox rows whose removal still waits for a
// write (ledger.Ledger.ForgetLater; a relay would otherwise publish them once more), closes
// the pool, and exports the spans still buffered (within tracing.ShutdownTimeout).
func (d *Deps) Close() {
	if d.NATS != nil {
		_ = d.NATS.Drain()
	}
	if d.Ledger != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = d.Ledger.FlushForgotten(ctx)
		cancel()
	}
	d.Pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), tracing.ShutdownTimeout)
	defer cancel()
	_ = d.Tracer.Shutdown(ctx)
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
