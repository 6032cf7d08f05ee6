package reconcile

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/backoff"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role"
)

// RoleConfig is the configuration of the reconciler role. Every field has an environment
// variable and a flag of the same meaning; the flag wins.
type RoleConfig struct {
	role.Common
	Concurrency     int           // ATMOST_RECONCILE_CONCURRENCY
	MaxAckPending   int           // ATMOST_RECONCILE_MAX_ACK_PENDING
	LookupTimeout   time.Duration // ATMOST_LOOKUP_TIMEOUT
	ReadBackTimeout time.Duration // ATMOST_READBACK_TIMEOUT
	ScanInterval    time.Duration // ATMOST_RECONCILE_SCAN_INTERVAL
	ScanAfter       time.Duration // ATMOST_RECONCILE_SCAN_AFTER
	RetryDelay      time.Duration // ATMOST_RECONCILE_RETRY_DELAY
}

func (c RoleConfig) reconcileConfig(log *zap.Logger) Config {
	return Config{Concurrency: c.Concurrency, MaxAckPending: c.MaxAckPending, LookupTimeout: c.LookupTimeout, ReadBackTimeout: c.ReadBackTimeout,
		ScanInterval: c.ScanInterval, ScanAfter: c.ScanAfter, RetryDelay: c.RetryDelay, Platforms: adapters.Registered(), Logger: log}
}

func (c RoleConfig) validate() error {
	// Zero means "default" to Config; on the command line it is a mistake.
	for name, v := range map[string]time.Duration{"lookup-timeout": c.LookupTimeout, "readback-timeout": c.ReadBackTimeout,
		"scan-interval": c.ScanInterval, "scan-after": c.ScanAfter, "retry-delay": c.RetryDelay} {
		if v <= 0 {
			return fmt.Errorf("%s %s: must be positive", name, v)
		}
	}
	if c.Concurrency < 1 {
		return fmt.Errorf("concurrency %d: must be at least 1", c.Concurrency)
	}
	if c.MaxAckPending < 1 {
		return fmt.Errorf("max-ack-pending %d: must be at least 1", c.MaxAckPending)
	}
	return c.Common.Validate()
}

// Main runs the reconciler role. It returns the process exit code: 0 after a clean shutdown
// (ctx ended: the intents in hand finish their turn), 1 on a fatal error, 2 for a bad command
// line.
func Main(ctx context.Context, args []string, getenv func(string) (string, bool), stderr io.Writer) int {
	env := role.Env(getenv)
	var cfg RoleConfig
	fs := flag.NewFlagSet("reconciler", flag.ContinueOnError)
	cfg.Common.Register(fs, env, "127.0.0.1:9104")
	fs.IntVar(&cfg.Concurrency, "concurrency", env.Int("ATMOST_RECONCILE_CONCURRENCY", DefaultConcurrency),
		"intents worked at once: reads, the one lookup, its read-back and resolution; an intent waiting out its reconcile delay holds none (env ATMOST_RECONCILE_CONCURRENCY)")
	fs.IntVar(&cfg.MaxAckPending, "max-ack-pending", env.Int("ATMOST_RECONCILE_MAX_ACK_PENDING", DefaultMaxAckPending),
		"indeterminate events held on the server while their intents wait out the reconcile delay (the shared consumer's MaxAckPending); reconciliation keeps pace with at most this many unknown outcomes per delay (env ATMOST_RECONCILE_MAX_ACK_PENDING)")
	fs.DurationVar(&cfg.LookupTimeout, "lookup-timeout", env.Duration("ATMOST_LOOKUP_TIMEOUT", DefaultLookupTimeout),
		"bound of the one lookup; a lookup that times out is spent and the intent parked (env ATMOST_LOOKUP_TIMEOUT)")
	fs.DurationVar(&cfg.ReadBackTimeout, "readback-timeout", env.Duration("ATMOST_READBACK_TIMEOUT", DefaultReadBackTimeout),
		"bound of the read-back of a found or reported object (env ATMOST_READBACK_TIMEOUT)")
	fs.DurationVar(&cfg.ScanInterval, "scan-interval", env.Duration("ATMOST_RECONCILE_SCAN_INTERVAL", DefaultScanInterval),
		"how often the ledger is scanned for indeterminate intents whose event was missed (env ATMOST_RECONCILE_SCAN_INTERVAL)")
	fs.DurationVar(&cfg.ScanAfter, "scan-after", env.Duration("ATMOST_RECONCILE_SCAN_AFTER", DefaultScanAfter),
		"the scan takes an intent whose lookup is still unclaimed this long after it became indeterminate; the event path works it at its reconcile delay (env ATMOST_RECONCILE_SCAN_AFTER)")
	fs.DurationVar(&cfg.RetryDelay, "retry-delay", env.Duration("ATMOST_RECONCILE_RETRY_DELAY", DefaultRetryDelay),
		"how long an intent waits when it cannot be worked now: adapter not opened, ledger failing (env ATMOST_RECONCILE_RETRY_DELAY)")
	code := role.Parse(fs, env, "reconciler", "Resolves indeterminate intents: evidence first, then after the reconcile delay ONE durably claimed lookup per intent.",
		args, stderr, func() error { return cfg.validate() })
	if code >= 0 {
		return code
	}
	return role.Run(ctx, "reconciler", cfg.Common, stderr, func(ctx context.Context, log *zap.Logger) error { return runRole(ctx, cfg, log) })
}

func runRole(ctx context.Context, cfg RoleConfig, log *zap.Logger) error {
	deps, err := role.Start(ctx, "reconciler", cfg.Common, relay.Config{}, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	var r *Reconciler
	if err := backoff.Retry(ctx, log, "create the reconciler consumer", func() (err error) {
		rc := cfg.reconcileConfig(log)
		rc.Tracer = deps.Tracer
		r, err = New(ctx, deps.JS, deps.Ledger, deps.Relay, rc)
		return err
	}); err != nil {
		return err
	}
	deps.Registry.MustRegister(r.Collectors()...)
	deps.Registry.MustRegister(role.ConsumerPending("atmost_reconcile_consumer_pending",
		"Indeterminate events waiting on ATMOST_EVENTS for the reconciler (-1 when JetStream did not answer).", r.consumer))
	addr, err := deps.Serve(ctx, cfg.HTTPAddr, log)
	if err != nil {
		return err
	}
	log.Info("reconciler running", zap.String("http", addr.String()), zap.Int("concurrency", cfg.Concurrency),
		zap.Duration("lookup_timeout", cfg.LookupTimeout), zap.Int("max_ack_pending", cfg.MaxAckPending),
		zap.Duration("scan_interval", cfg.ScanInterval), zap.Duration("scan_after", cfg.ScanAfter))
	if err := r.Run(ctx); err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	return nil
}
