package dispatch

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/backoff"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/pkg/platform"
)

// RoleConfig is the configuration of the dispatcher role. Every field has an environment
// variable and a flag of the same meaning; the flag wins.
type RoleConfig struct {
	role.Common
	Batch           int           // ATMOST_DISPATCH_BATCH
	Concurrency     int           // ATMOST_DISPATCH_CONCURRENCY
	Pipelines       int           // ATMOST_DISPATCH_PIPELINES
	ClaimLease      time.Duration // ATMOST_CLAIM_LEASE
	InFlightLease   time.Duration // ATMOST_INFLIGHT_LEASE
	SendTimeout     time.Duration // ATMOST_SEND_TIMEOUT
	ReadBackTimeout time.Duration // ATMOST_READBACK_TIMEOUT
	Margin          time.Duration // ATMOST_LEASE_MARGIN
	GateDelay       time.Duration // ATMOST_GATE_DELAY
	ColdAfter       time.Duration // ATMOST_COLD_AFTER
}

func (c RoleConfig) dispatchConfig(platforms platform.Registry, log *zap.Logger) Config {
	return Config{Batch: c.Batch, Concurrency: c.Concurrency, Pipelines: c.Pipelines, ClaimLease: c.ClaimLease, InFlightLease: c.InFlightLease,
		SendTimeout: c.SendTimeout, ReadBackTimeout: c.ReadBackTimeout, Margin: c.Margin, GateDelay: c.GateDelay,
		ColdAfter: c.ColdAfter, Platforms: platforms, Logger: log}
}

func (c RoleConfig) validate() error {
	// Zero means "default" to Config; on the command line it is a mistake.
	for name, v := range map[string]time.Duration{"claim lease": c.ClaimLease, "in-flight lease": c.InFlightLease, "send timeout": c.SendTimeout,
		"read-back timeout": c.ReadBackTimeout, "lease margin": c.Margin, "gate delay": c.GateDelay, "cold after": c.ColdAfter} {
		if v <= 0 {
			return fmt.Errorf("%s %s: must be positive", name, v)
		}
	}
	if c.Batch < 1 || c.Concurrency < 1 || c.Pipelines < 1 {
		return fmt.Errorf("batch %d, concurrency %d and pipelines %d: must be at least 1", c.Batch, c.Concurrency, c.Pipelines)
	}
	if err := c.dispatchConfig(adapters.Registered(), nil).withDefaults().validate(); err != nil {
		return err
	}
	return c.Common.Validate()
}

// Main runs the dispatcher role. It returns the process exit code: 0 after a clean shutdown
// (ctx ended: no new send starts, the sends in flight finish and are recorded), 1 on a fatal
// error, 2 for a bad command line.
func Main(ctx context.Context, args []string, getenv func(string) (string, bool), stderr io.Writer) int {
	cfg, code := parseRoleConfig(args, getenv, stderr)
	if code >= 0 {
		return code
	}
	return role.Run(ctx, "dispatcher", cfg.Common, stderr, func(ctx context.Context, log *zap.Logger) error { return runRole(ctx, cfg, log) })
}

func parseRoleConfig(args []string, getenv func(string) (string, bool), stderr io.Writer) (RoleConfig, int) {
	env := role.Env(getenv)
	var cfg RoleConfig
	fs := flag.NewFlagSet("dispatcher", flag.ContinueOnError)
	cfg.Common.Register(fs, env, "127.0.0.1:9102")
	fs.IntVar(&cfg.Batch, "batch", env.Int("ATMOST_DISPATCH_BATCH", DefaultBatch), "work items taken at once; their ledger steps are one statement each (env ATMOST_DISPATCH_BATCH)")
	fs.IntVar(&cfg.Concurrency, "concurrency", env.Int("ATMOST_DISPATCH_CONCURRENCY", DefaultConcurrency), "intents worked at once, sends in flight included (env ATMOST_DISPATCH_CONCURRENCY)")
	fs.IntVar(&cfg.Pipelines, "pipelines", env.Int("ATMOST_DISPATCH_PIPELINES", DefaultPipelines), "batches taken through the ledger steps at once; more than 2 conflict under serializable (env ATMOST_DISPATCH_PIPELINES)")
	fs.DurationVar(&cfg.ClaimLease, "claim-lease", env.Duration("ATMOST_CLAIM_LEASE", DefaultClaimLease), "pre-authorization lease taken by Begin (env ATMOST_CLAIM_LEASE)")
	fs.DurationVar(&cfg.InFlightLease, "inflight-lease", env.Duration("ATMOST_INFLIGHT_LEASE", DefaultInFlightLease), "lease written by Authorize; must exceed send timeout + read-back timeout + margin + the dispatcher's linger (env ATMOST_INFLIGHT_LEASE)")
	fs.DurationVar(&cfg.SendTimeout, "send-timeout", env.Duration("ATMOST_SEND_TIMEOUT", DefaultSendTimeout), "bound of one send (env ATMOST_SEND_TIMEOUT)")
	fs.DurationVar(&cfg.ReadBackTimeout, "readback-timeout", env.Duration("ATMOST_READBACK_TIMEOUT", DefaultReadBackTimeout), "bound of the read-back after a claimed success (env ATMOST_READBACK_TIMEOUT)")
	fs.DurationVar(&cfg.Margin, "lease-margin", env.Duration("ATMOST_LEASE_MARGIN", DefaultMargin), "the send's context ends this long before the in-flight lease (env ATMOST_LEASE_MARGIN)")
	fs.DurationVar(&cfg.GateDelay, "gate-delay", env.Duration("ATMOST_GATE_DELAY", DefaultGateDelay), "how long work waits while a kill switch or a revoked credential refuses it (env ATMOST_GATE_DELAY)")
	fs.DurationVar(&cfg.ColdAfter, "cold-after", env.Duration("ATMOST_COLD_AFTER", DefaultColdAfter), "an account with no success seen for this long sends one intent at a time until one succeeds (env ATMOST_COLD_AFTER)")
	code := role.Parse(fs, env, "dispatcher", "Works the intents of ATMOST_DISPATCH: gates, Begin, Authorize, the witness on ATMOST_EVENTS, one send, read-back, Complete.", args, stderr, func() error { return cfg.validate() })
	return cfg, code
}

func runRole(ctx context.Context, cfg RoleConfig, log *zap.Logger) error {
	deps, err := role.Start(ctx, "dispatcher", cfg.Common, relay.Config{RemoveLater: true}, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	var d *Dispatcher
	if err := backoff.Retry(ctx, log, "create the dispatch consumer", func() (err error) {
		dc := cfg.dispatchConfig(adapters.Registered(), log)
		dc.Tracer = deps.Tracer
		d, err = New(ctx, deps.JS, deps.Ledger, deps.Relay, dc)
		return err
	}); err != nil {
		return err
	}

	deps.Registry.MustRegister(d.Collectors()...)
	deps.Registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "atmost_dispatch_in_progress",
			Help: "Intents being worked by this process (sends in flight included)."}, func() float64 { return float64(len(d.slots)) }),
		role.ConsumerPending("atmost_dispatch_consumer_pending",
			"Work items waiting on ATMOST_DISPATCH for this consumer (-1 when JetStream did not answer).", d.consumer))
	addr, err := deps.Serve(ctx, cfg.HTTPAddr, log)
	if err != nil {
		return err
	}
	log.Info("dispatcher running", zap.String("http", addr.String()), zap.Int("batch", cfg.Batch), zap.Int("concurrency", cfg.Concurrency),
		zap.Duration("inflight_lease", cfg.InFlightLease), zap.Duration("send_timeout", cfg.SendTimeout), zap.String("isolation", cfg.Isolation))
	if err := d.Run(ctx); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	return nil
}
