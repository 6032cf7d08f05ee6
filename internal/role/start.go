package role

import (
	"context"
	"net"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/serve"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/pkg/ledger"
)

// Deps are what every role runs on: the ledger's pool, the NATS connection with atmost's
// streams in place, the ledger acting as the role, the relay of its outbox, and the registry
// its metrics go to (the relay's and the ledger's are registered already).
type Deps struct {
	Pool     *pgxpool.Pool
	NATS     *nats.Conn
	JS       jetstream.JetStream
	Ledger   *ledger.Ledger
	Relay    *relay.Relay
	Registry *prometheus.Registry
}

// Start connects a role: PostgreSQL (lazily), NATS (waiting with backoff), the streams
// (created idempotently; an incompatible one stops it), the ledger with the role's name as
// actor, and the relay. Close releases what it opened.
func Start(ctx context.Context, name string, c Common, relayCfg relay.Config, log *zap.Logger) (*Deps, error) {
	iso, err := c.IsoLevel()
	if err != nil {
		return nil, err
	}
	pool, err := OpenPool(ctx, c.DatabaseURL)
	if err != nil {
		return nil, err
	}
	d := &Deps{Pool: pool}
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
	if d.Ledger, err = ledger.New(pool, ledger.Config{Actor: name, Isolation: iso, Logger: log}); err != nil {
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
			Help: "Ledger transactions restarted after a serialization failure or deadlock."}, func() float64 { return float64(d.Ledger.Retries()) }))
	return d, nil
}

// Serve serves /healthz, /readyz (PostgreSQL and NATS) and /metrics on addr until ctx ends.
func (d *Deps) Serve(ctx context.Context, addr string, log *zap.Logger) (net.Addr, error) {
	return serve.Listen(ctx, addr, serve.Handler(d.Registry, Checks(d.Pool, d.NATS)), log)
}

// Close drains the NATS connection and closes the pool.
func (d *Deps) Close() {
	if d.NATS != nil {
		_ = d.NATS.Drain()
	}
	d.Pool.Close()
}
