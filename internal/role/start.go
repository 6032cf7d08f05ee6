package role

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/backoff"
	"github.com/atmost/atmost/internal/natsconn"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/serve"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/tracing"
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
	if d.NATS, err = natsconn.Connect(ctx, name, c.NATSURL, log); err != nil {
		d.Close()
		return nil, err
	}
	if d.JS, err = jetstream.New(d.NATS); err != nil {
		d.Close()
		return nil, err
	}
	if err := backoff.Retry(ctx, log, "create streams", func() error {
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

// OpenPool opens the ledger's connection pool (lazily: an unreachable server is reported by
// the first use and by /readyz, not here).
func OpenPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("database URL: %w", err)
	}
	return pool, nil
}

// Checks are the readiness checks of a role on PostgreSQL and NATS.
func Checks(pool *pgxpool.Pool, nc *nats.Conn) map[string]serve.Check {
	return map[string]serve.Check{
		"postgresql": func(ctx context.Context) error { return pool.Ping(ctx) },
		"nats": func(context.Context) error {
			if !nc.IsConnected() {
				return errors.New("not connected")
			}
			return nil
		},
	}
}
