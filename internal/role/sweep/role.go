package sweep

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role"
)

// RoleConfig is the configuration of the sweeper role. Every field has an environment
// variable and a flag of the same meaning; the flag wins.
type RoleConfig struct {
	role.Common
	Interval          time.Duration // ATMOST_SWEEP_INTERVAL
	Batch             int           // ATMOST_SWEEP_BATCH
	StrandedAfter     time.Duration // ATMOST_SWEEP_STRANDED_AFTER
	LookupStale       time.Duration // ATMOST_SWEEP_LOOKUP_STALE
	UnreconciledAfter time.Duration // ATMOST_SWEEP_UNRECONCILED_AFTER
	Drain             bool          // ATMOST_SWEEP_DRAIN
	AlertURL          string        // ATMOST_ALERT_URL
	AlertSecret       string        // ATMOST_ALERT_SECRET (environment only: never on a command line)
}

func (c RoleConfig) sweepConfig(log *zap.Logger) Config {
	return Config{Interval: c.Interval, Batch: c.Batch, StrandedAfter: c.StrandedAfter, LookupStale: c.LookupStale,
		UnreconciledAfter: c.UnreconciledAfter, NoDrain: !c.Drain, AlertURL: c.AlertURL, AlertSecret: c.AlertSecret, Logger: log}
}

func (c RoleConfig) validate() error {
	// Zero means "default" to Config; on the command line it is a mistake.
	for name, v := range map[string]time.Duration{"interval": c.Interval, "stranded-after": c.StrandedAfter,
		"lookup-stale": c.LookupStale, "unreconciled-after": c.UnreconciledAfter} {
		if v <= 0 {
			return fmt.Errorf("%s %s: must be positive", name, v)
		}
	}
	if c.Batch < 1 {
		return fmt.Errorf("batch %d: must be at least 1", c.Batch)
	}
	if c.AlertURL != "" && c.AlertSecret == "" {
		return fmt.Errorf("alert-url %s: ATMOST_ALERT_SECRET must be set too: alerts are signed", c.AlertURL)
	}
	return c.Common.Validate()
}

// Main runs the sweeper role. It returns the process exit code: 0 after a clean shutdown (ctx
// ended), 1 on a fatal error, 2 for a bad command line.
func Main(ctx context.Context, args []string, getenv func(string) (string, bool), stderr io.Writer) int {
	env := role.Env(getenv)
	var cfg RoleConfig
	fs := flag.NewFlagSet("sweeper", flag.ContinueOnError)
	cfg.Common.Register(fs, env, "127.0.0.1:9103")
	fs.DurationVar(&cfg.Interval, "interval", env.Duration("ATMOST_SWEEP_INTERVAL", DefaultInterval), "pause between passes (env ATMOST_SWEEP_INTERVAL)")
	fs.IntVar(&cfg.Batch, "batch", env.Int("ATMOST_SWEEP_BATCH", DefaultBatch), "rows one duty looks at in one pass (env ATMOST_SWEEP_BATCH)")
	fs.DurationVar(&cfg.StrandedAfter, "stranded-after", env.Duration("ATMOST_SWEEP_STRANDED_AFTER", DefaultStrandedAfter),
		"an unclaimed pending intent idle this long gets its work published again; keep it above the dispatcher's gate delay (env ATMOST_SWEEP_STRANDED_AFTER)")
	fs.DurationVar(&cfg.LookupStale, "lookup-stale", env.Duration("ATMOST_SWEEP_LOOKUP_STALE", DefaultLookupStale),
		"a claimed reconciliation lookup unresolved this long is parked for a human, never looked up again (env ATMOST_SWEEP_LOOKUP_STALE)")
	fs.DurationVar(&cfg.UnreconciledAfter, "unreconciled-after", env.Duration("ATMOST_SWEEP_UNRECONCILED_AFTER", DefaultUnreconciledAfter),
		"an indeterminate intent with no lookup claimed this long is parked for a human (env ATMOST_SWEEP_UNRECONCILED_AFTER)")
	fs.StringVar(&cfg.AlertURL, "alert-url", env.String("ATMOST_ALERT_URL", ""), "POST every alert (a trip, a heal, a park) here too, signed with ATMOST_ALERT_SECRET (env ATMOST_ALERT_URL)")
	cfg.AlertSecret, _ = getenv("ATMOST_ALERT_SECRET")
	fs.BoolVar(&cfg.Drain, "drain", env.Bool("ATMOST_SWEEP_DRAIN", true), "publish the outbox every pass, the relay's slow path; --drain=false when another role does (env ATMOST_SWEEP_DRAIN)")
	code := role.Parse(fs, env, "sweeper", "Expires leases one way, republishes stranded work, retries failed intents by policy and at its rate, parks what no reconciler will finish, drains the outbox.",
		args, stderr, func() error { return cfg.validate() })
	if code >= 0 {
		return code
	}
	return role.Run(ctx, "sweeper", cfg.Common, stderr, func(ctx context.Context, log *zap.Logger) error { return runRole(ctx, cfg, log) })
}

func runRole(ctx context.Context, cfg RoleConfig, log *zap.Logger) error {
	deps, err := role.Start(ctx, "sweeper", cfg.Common, relay.Config{}, log)
	if err != nil {
		return err
	}
	defer deps.Close()
	s, err := New(deps.Ledger, deps.Relay, deps.JS, cfg.sweepConfig(log))
	if err != nil {
		return err
	}
	deps.Registry.MustRegister(s.Collectors()...)
	addr, err := deps.Serve(ctx, cfg.HTTPAddr, log)
	if err != nil {
		return err
	}
	log.Info("sweeper running", zap.String("http", addr.String()), zap.Duration("interval", cfg.Interval), zap.Int("batch", cfg.Batch),
		zap.Duration("stranded_after", cfg.StrandedAfter), zap.Duration("lookup_stale", cfg.LookupStale),
		zap.Duration("unreconciled_after", cfg.UnreconciledAfter), zap.Bool("drain", cfg.Drain))
	return s.Run(ctx)
}
