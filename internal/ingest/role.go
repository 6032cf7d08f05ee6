package ingest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
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

// RoleConfig is the configuration of the ingest role. Every field has an environment variable
// and a flag of the same meaning; the flag wins.
type RoleConfig struct {
	DatabaseURL   string        // ATMOST_DATABASE_URL
	NATSURL       string        // ATMOST_NATS_URL
	HTTPAddr      string        // ATMOST_HTTP_ADDR
	Batch         int           // ATMOST_INGEST_BATCH
	RelayInterval time.Duration // ATMOST_RELAY_INTERVAL
	Replicas      int           // ATMOST_STREAM_REPLICAS
	Isolation     string        // ATMOST_LEDGER_ISOLATION
}

func (c RoleConfig) validate() error {
	switch {
	case c.Batch < 1 || c.Batch > 10000:
		return fmt.Errorf("batch %d: must be between 1 and 10000", c.Batch)
	case c.RelayInterval < 10*time.Millisecond:
		return fmt.Errorf("relay interval %s: must be at least 10ms", c.RelayInterval)
	case c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5:
		return fmt.Errorf("replicas %d: must be 1, 3 or 5", c.Replicas)
	}
	if _, err := isolation(c.Isolation); err != nil {
		return err
	}
	return nil
}

func isolation(s string) (pgx.TxIsoLevel, error) {
	switch s {
	case "serializable":
		return pgx.Serializable, nil
	case "read-committed":
		return pgx.ReadCommitted, nil
	}
	return "", fmt.Errorf("isolation %q: must be serializable or read-committed", s)
}

// Main runs the ingest role: ATMOST_INTENTS into the ledger, and the outbox relay (each batch's
// transitions are published right after its commit; a loop every relay interval drains what
// is left). It returns the process exit code: 0 after a clean shutdown (ctx ended: the batch in
// hand is finished), 1 on a fatal error, 2 for a bad command line.
func Main(ctx context.Context, args []string, getenv func(string) (string, bool), stderr io.Writer) int {
	cfg, code := parseRoleConfig(args, getenv, stderr)
	if code >= 0 {
		return code
	}
	log, err := zap.NewProduction() // JSON lines on standard error
	if err != nil {
		fmt.Fprintf(stderr, "ingest: logger: %v\n", err)
		return 1
	}
	defer func() { _ = log.Sync() }()
	log = log.Named("ingest")
	if err := runRole(ctx, cfg, log); err != nil {
		log.Error("ingest stopped", zap.Error(err))
		return 1
	}
	log.Info("ingest stopped cleanly")
	return 0
}

func parseRoleConfig(args []string, getenv func(string) (string, bool), stderr io.Writer) (RoleConfig, int) {
	env := func(name, def string) string {
		if v, ok := getenv(name); ok && v != "" {
			return v
		}
		return def
	}
	envInt := func(name string, def int) int {
		if n, err := strconv.Atoi(env(name, "")); err == nil {
			return n
		}
		return def
	}
	envDuration := func(name string, def time.Duration) time.Duration {
		if d, err := time.ParseDuration(env(name, "")); err == nil {
			return d
		}
		return def
	}
	var cfg RoleConfig
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.DatabaseURL, "database-url", env("ATMOST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/atmost?sslmode=disable"), "the ledger (env ATMOST_DATABASE_URL)")
	fs.StringVar(&cfg.NATSURL, "nats-url", env("ATMOST_NATS_URL", nats.DefaultURL), "the NATS server (env ATMOST_NATS_URL)")
	fs.StringVar(&cfg.HTTPAddr, "http", env("ATMOST_HTTP_ADDR", "127.0.0.1:9101"), "address of /healthz, /readyz and /metrics (env ATMOST_HTTP_ADDR)")
	fs.IntVar(&cfg.Batch, "batch", envInt("ATMOST_INGEST_BATCH", 100), "messages per fetch; their intents go to the ledger in one transaction (env ATMOST_INGEST_BATCH)")
	fs.DurationVar(&cfg.RelayInterval, "relay-interval", envDuration("ATMOST_RELAY_INTERVAL", time.Second), "how often the relay drains the outbox (env ATMOST_RELAY_INTERVAL)")
	fs.IntVar(&cfg.Replicas, "replicas", envInt("ATMOST_STREAM_REPLICAS", 1), "replicas of the streams ingest creates: 1, or 3 in a cluster (env ATMOST_STREAM_REPLICAS)")
	fs.StringVar(&cfg.Isolation, "isolation", env("ATMOST_LEDGER_ISOLATION", "serializable"), "ledger transaction isolation: serializable or read-committed, the faster on PostgreSQL (env ATMOST_LEDGER_ISOLATION)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: ingest [flags]\n\nConsumes ATMOST_INTENTS into the ledger and relays the outbox to ATMOST_EVENTS and ATMOST_DISPATCH.\nEvery flag has an environment variable; the flag wins.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, 0
		}
		return cfg, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ingest: unexpected argument %q\n", fs.Arg(0))
		return cfg, 2
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "ingest: %v\n", err)
		return cfg, 2
	}
	return cfg, -1
}

// roleMetrics are what the ingest role exports.
type roleMetrics struct {
	intents *prometheus.CounterVec
	batches *prometheus.CounterVec
}

func newRoleMetrics(reg *prometheus.Registry, l *ledger.Ledger, rel *relay.Relay) roleMetrics {
	m := roleMetrics{
		intents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_ingest_messages_total",
			Help: "Messages ingested, by outcome: created, duplicate, rejected."}, []string{"outcome"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_ingest_batches_total",
			Help: "Batches fetched, by result: ok, or retried (nak'ed for redelivery)."}, []string{"result"}),
	}
	reg.MustRegister(m.intents, m.batches,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "atmost_relay_events_published_total",
			Help: "Transitions the relay published and removed from the outbox."}, func() float64 { return float64(rel.Published()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "atmost_ledger_transaction_restarts_total",
			Help: "Ledger transactions restarted after a serialization failure or deadlock."}, func() float64 { return float64(l.Retries()) }))
	return m
}

func runRole(ctx context.Context, cfg RoleConfig, log *zap.Logger) error {
	iso, _ := isolation(cfg.Isolation)
	pool, err := pgxpool.New(ctx, cfg.DatabaseURL)
	if err != nil {
		return fmt.Errorf("database URL: %w", err)
	}
	defer pool.Close()
	nc, err := connectNATS(ctx, cfg.NATSURL, log)
	if err != nil {
		return err
	}
	defer nc.Drain()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := retry(ctx, log, "create streams", func() error {
		return streams.Ensure(ctx, nc, js, streams.Config{Replicas: cfg.Replicas})
	}); err != nil {
		return err
	}
	l, err := ledger.New(pool, ledger.Config{Actor: "ingest", Isolation: iso, Logger: log})
	if err != nil {
		return err
	}
	in, err := New(ctx, js, l, Config{Batch: cfg.Batch, Logger: log})
	if err != nil {
		return err
	}
	rel := relay.New(l, js, relay.Config{Interval: cfg.RelayInterval, Logger: log})

	reg := serve.NewRegistry()
	metrics := newRoleMetrics(reg, l, rel)
	addr, err := serve.Listen(ctx, cfg.HTTPAddr, serve.Handler(reg, map[string]serve.Check{
		"postgresql": func(ctx context.Context) error { return pool.Ping(ctx) },
		"nats": func(context.Context) error {
			if !nc.IsConnected() {
				return errors.New("not connected")
			}
			return nil
		},
	}), log)
	if err != nil {
		return err
	}
	log.Info("ingest running", zap.String("http", addr.String()), zap.Int("batch", cfg.Batch), zap.String("isolation", cfg.Isolation))

	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		_ = rel.Run(ctx) // the slow path
	}()
	for ctx.Err() == nil {
		// The batch in hand is finished even when ctx ends meanwhile (SIGTERM).
		stats, err := in.Batch(context.WithoutCancel(ctx))
		metrics.intents.WithLabelValues("created").Add(float64(stats.Created))
		metrics.intents.WithLabelValues("duplicate").Add(float64(stats.Duplicates))
		metrics.intents.WithLabelValues("rejected").Add(float64(stats.Rejected))
		if err != nil {
			metrics.batches.WithLabelValues("retried").Inc()
			log.Warn("batch not ingested; it will be redelivered", zap.Error(err))
			sleepCtx(ctx, time.Second)
			continue
		}
		if stats != (Stats{}) {
			metrics.batches.WithLabelValues("ok").Inc()
		}
		if stats.Created > 0 {
			// The fast path: publish this batch's transitions right after their commit.
			if _, err := rel.Drain(context.WithoutCancel(ctx)); err != nil {
				log.Warn("relay after commit failed; the relay loop will retry", zap.Error(err))
			}
		}
	}
	<-relayDone
	return nil
}

// connectNATS connects, waiting with backoff while the server is unreachable at start-up; once
// connected, nats.go reconnects by itself for as long as the process lives.
func connectNATS(ctx context.Context, url string, log *zap.Logger) (*nats.Conn, error) {
	var nc *nats.Conn
	err := retry(ctx, log, "connect to NATS at "+url, func() (err error) {
		nc, err = nats.Connect(url, nats.Name("atmost-ingest"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(false))
		return err
	})
	return nc, err
}

// retry runs op until it succeeds or ctx ends, doubling its pause up to 10 s.
func retry(ctx context.Context, log *zap.Logger, what string, op func() error) error {
	pause := 100 * time.Millisecond
	for {
		err := op()
		if err == nil {
			return nil
		}
		if errors.Is(err, streams.ErrIncompatible) || errors.Is(err, streams.ErrServerTooOld) {
			return err // waiting will not fix it
		}
		log.Warn(what+" failed; retrying", zap.Error(err), zap.Duration("in", pause))
		if !sleepCtx(ctx, pause) {
			return fmt.Errorf("%s: %w (gave up: %v)", what, err, ctx.Err())
		}
		pause = min(2*pause, 10*time.Second)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
