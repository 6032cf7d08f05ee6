package ingest

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/backoff"
	"github.com/atmost/atmost/internal/outcome"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
)

// RoleConfig is the configuration of the ingest role. Every field has an environment variable
// and a flag of the same meaning; the flag wins.
type RoleConfig struct {
	role.Common
	Batch         int           // ATMOST_INGEST_BATCH
	Linger        time.Duration // ATMOST_INGEST_LINGER
	MaxDeliveries int           // ATMOST_INGEST_MAX_DELIVERIES
	RelayInterval time.Duration // ATMOST_RELAY_INTERVAL
	Status        bool          // ATMOST_INGEST_STATUS
	HTTPAPI       string        // ATMOST_INGEST_HTTP_API
}

func (c RoleConfig) validate() error {
	switch {
	case c.Batch < 1 || c.Batch > 10000:
		return fmt.Errorf("batch %d: must be between 1 and 10000", c.Batch)
	case c.Linger < 0 || c.Linger > time.Second:
		return fmt.Errorf("linger %s: must be between 0 and 1s", c.Linger)
	case c.MaxDeliveries < 1:
		return fmt.Errorf("max deliveries %d: must be at least 1", c.MaxDeliveries)
	case c.RelayInterval < 10*time.Millisecond:
		return fmt.Errorf("relay interval %s: must be at least 10ms", c.RelayInterval)
	}
	return c.Common.Validate()
}

// ingesterConfig is the Ingester's configuration for this role. The role's --linger 0 means
// none, where Config's zero Linger is its default: the role passes none as Config's negative
// Linger.
func (c RoleConfig) ingesterConfig(log *zap.Logger, tracer trace.TracerProvider) Config {
	linger := c.Linger
	if linger == 0 {
		linger = -1
	}
	return Config{Batch: c.Batch, Linger: linger, MaxDeliveries: c.MaxDeliveries, Logger: log, Tracer: tracer}
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
	return role.Run(ctx, "ingest", cfg.Common, stderr, func(ctx context.Context, log *zap.Logger) error { return runRole(ctx, cfg, log) })
}

func parseRoleConfig(args []string, getenv func(string) (string, bool), stderr io.Writer) (RoleConfig, int) {
	env := role.Env(getenv)
	var cfg RoleConfig
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	cfg.Common.Register(fs, env, "127.0.0.1:9101")
	fs.IntVar(&cfg.Batch, "batch", env.Int("ATMOST_INGEST_BATCH", DefaultBatch), "at most this many messages per fetch (a fetch takes what has arrived, never waiting for a full batch); their intents go to the ledger in one transaction (env ATMOST_INGEST_BATCH)")
	fs.DurationVar(&cfg.Linger, "linger", env.Duration("ATMOST_INGEST_LINGER", DefaultLinger), "how long after the previous batch a fetch with less than a batch waits for more, so that a steady load's batches hold what arrived over this long; 0 for none (env ATMOST_INGEST_LINGER)")
	fs.IntVar(&cfg.MaxDeliveries, "max-deliveries", env.Int("ATMOST_INGEST_MAX_DELIVERIES", DefaultMaxDeliveries), "the delivery on which a message the database refused every time is recorded as unstorable and acknowledged (env ATMOST_INGEST_MAX_DELIVERIES)")
	fs.DurationVar(&cfg.RelayInterval, "relay-interval", env.Duration("ATMOST_RELAY_INTERVAL", relay.DefaultInterval), "how often the relay drains the outbox (env ATMOST_RELAY_INTERVAL)")
	fs.BoolVar(&cfg.Status, "status", env.Bool("ATMOST_INGEST_STATUS", true), "serve the outcome service "+client.StatusService+" on "+client.StatusSubjects+", which answers producers' Status and Await from the ledger; --status=false leaves it to other instances (env ATMOST_INGEST_STATUS)")
	fs.StringVar(&cfg.HTTPAPI, "http-api", env.String("ATMOST_INGEST_HTTP_API", ""), "serve the producers' HTTP API (docs/http-api.yaml) on this address, such as 127.0.0.1:8088; off when empty (env ATMOST_INGEST_HTTP_API)")
	code := role.Parse(fs, env, "ingest", "Consumes ATMOST_INTENTS into the ledger and relays the outbox to ATMOST_EVENTS and ATMOST_DISPATCH.", args, stderr, func() error { return cfg.validate() })
	return cfg, code
}

// roleMetrics are what the ingest role exports.
type roleMetrics struct {
	intents *prometheus.CounterVec
	batches *prometheus.CounterVec
}

func newRoleMetrics(reg *prometheus.Registry) roleMetrics {
	m := roleMetrics{
		intents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_ingest_messages_total",
			Help: "Messages ingested, by outcome: created, duplicate, rejected, unstorable (the database refused it up to the delivery bound; recorded by its digest)."}, []string{"outcome"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "atmost_ingest_batches_total",
			Help: "Batches fetched, by result: ok, or retried (nak'ed for redelivery)."}, []string{"result"}),
	}
	reg.MustRegister(m.intents, m.batches)
	return m
}

func runRole(ctx context.Context, cfg RoleConfig, log *zap.Logger) error {
	deps, err := role.Start(ctx, "ingest", cfg.Common, relay.Config{Interval: cfg.RelayInterval, RemoveLater: true}, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	rel := deps.Relay
	// As the dispatcher and the reconciler do: on a cluster, the JetStream API does not answer
	// while the meta group or the stream elects a leader.
	var in *Ingester
	if err := backoff.Retry(ctx, log, "create the ingest consumer", func() (err error) {
		in, err = New(ctx, deps.JS, deps.Ledger, cfg.ingesterConfig(log, deps.Tracer))
		return err
	}); err != nil {
		return err
	}
	if cfg.Status {
		intents, err := deps.JS.Stream(ctx, events.IntentsStream)
		if err != nil {
			return fmt.Errorf("ingest: %s: %w", events.IntentsStream, err)
		}
		svc, err := outcome.Start(deps.NATS, deps.Ledger, outcome.Config{Logger: log, Intents: intents})
		if err != nil {
			return err
		}
		defer svc.Stop() // before deps.Close drains the connection
		deps.Registry.MustRegister(svc.Collectors()...)
	}
	metrics := newRoleMetrics(deps.Registry)
	deps.Registry.MustRegister(role.ConsumerPending("atmost_ingest_consumer_pending",
		"Producers' messages waiting on ATMOST_INTENTS for ingest (-1 when JetStream did not answer).", in.consumer))
	apiAddr := ""
	if cfg.HTTPAPI != "" {
		api, err := NewHTTPAPI(ctx, deps.JS, deps.Ledger, HTTPConfig{Logger: log})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", cfg.HTTPAPI)
		if err != nil {
			return fmt.Errorf("ingest: the HTTP API: listen on %s: %w", cfg.HTTPAPI, err)
		}
		deps.Registry.MustRegister(api.Collectors()...)
		apiAddr = ln.Addr().String()
		apiCtx, stopAPI := context.WithCancel(ctx)
		apiDone := make(chan struct{})
		go func() {
			defer close(apiDone)
			if err := api.Serve(apiCtx, ln); err != nil {
				log.Error("the HTTP API stopped", zap.Error(err))
			}
		}()
		// Its requests end before deps.Close drains the connection they publish on.
		defer func() { stopAPI(); <-apiDone }()
	}
	addr, err := deps.Serve(ctx, cfg.HTTPAddr, log)
	if err != nil {
		return err
	}
	log.Info("ingest running", zap.String("http", addr.String()), zap.String("http_api", apiAddr), zap.Int("batch", cfg.Batch), zap.Duration("linger", cfg.Linger), zap.Int("max_deliveries", cfg.MaxDeliveries), zap.String("isolation", cfg.Isolation), zap.Bool("status", cfg.Status))

	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		_ = rel.Run(ctx) // the slow path
	}()
	for ctx.Err() == nil {
		// The batch in hand is finished even when ctx ends meanwhile (SIGTERM).
		stats, written, err := in.BatchWritten(context.WithoutCancel(ctx))
		metrics.intents.WithLabelValues("created").Add(float64(stats.Created))
		metrics.intents.WithLabelValues("duplicate").Add(float64(stats.Duplicates))
		metrics.intents.WithLabelValues("rejected").Add(float64(stats.Rejected))
		metrics.intents.WithLabelValues("unstorable").Add(float64(stats.Unstorable))
		if !written.Empty() {
			// The fast path: publish the transitions of this batch's intents right after the
			// commit, even when the batch failed afterwards (its rejects). Only theirs: the rows
			// other writers (dispatchers, sweepers) committed meanwhile are theirs to publish,
			// and the slow path catches whatever a writer missed.
			_ = rel.AfterWrite(context.WithoutCancel(ctx), written)
		}
		if err != nil {
			metrics.batches.WithLabelValues("retried").Inc()
			log.Warn("batch not ingested; it will be redelivered", zap.Error(err))
			backoff.Sleep(ctx, time.Second)
			continue
		}
		if stats != (Stats{}) {
			metrics.batches.WithLabelValues("ok").Inc()
		}
	}
	if err := in.Close(); err != nil {
		log.Warn("giving back what the ingester held undelivered failed; it comes back after the ack wait", zap.Error(err))
	}
	<-relayDone
	return nil
}
