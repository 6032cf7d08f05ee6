package platformsim

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/atmost/atmost/internal/flaghelp"
	"github.com/atmost/atmost/internal/version"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Main runs the simulator as a process: it serves until ctx ends (SIGINT or SIGTERM in
// cmd/platformsim), printing the base URL as one line on stdout once it is bound and logging
// JSON lines on stderr. It returns the exit code: 0 after a clean stop (--help included), 1
// when the address cannot be bound, 2 for a bad command line or environment.
func Main(ctx context.Context, args []string, getenv func(string) (string, bool), stdout, stderr io.Writer) int {
	cfg, addr, code := parseArgs(args, getenv, stderr)
	if code >= 0 {
		return code
	}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()),
		zapcore.Lock(zapcore.AddSync(stderr)), zap.InfoLevel))
	defer func() { _ = log.Sync() }()
	cfg.Logger = log // the server names its own lines "platformsim"
	log = log.Named("platformsim")
	s, err := New(cfg)
	if err != nil { // parseArgs validated cfg already
		fmt.Fprintf(stderr, "platformsim: %v\n", err)
		return 2
	}
	url, stopped, err := s.Serve(ctx, addr)
	if err != nil {
		log.Error("platformsim cannot start", zap.Error(err))
		return 1
	}
	// The log line first: whoever reads the URL from stdout (a script, a test) may already be
	// sending, and its requests' own log lines then come after the one that says how it serves.
	log.Info("platformsim serving", zap.String("url", url), zap.Duration("latency", cfg.Latency),
		zap.Duration("list_lag", cfg.ListLag), zap.Bool("status_lookup", cfg.StatusLookup),
		zap.Bool("dedupe", cfg.Dedupe), zap.Any("plan", s.Plan()))
	fmt.Fprintln(stdout, url)
	<-stopped
	c := s.Counts()
	log.Info("platformsim stopped", zap.Int("objects", c.Objects), zap.Int("requests", c.Requests),
		zap.Int("max_created_per_key", c.MaxCreatedPerKey), zap.Strings("keys_over_one", c.KeysOverOne))
	return 0
}

// parseArgs reads the settings: each from its environment variable, a flag overriding it. It
// returns code -1 when the simulator should run, else the exit code (0 for --help).
func parseArgs(args []string, getenv func(string) (string, bool), stderr io.Writer) (cfg Config, addr string, code int) {
	// A malformed environment value is an error unless its flag overrides it.
	envErrs := map[string]error{}
	env := func(name, def string) string {
		if v, ok := getenv(name); ok && v != "" {
			return v
		}
		return def
	}
	envBool := func(flagName, name string) bool {
		v := env(name, "")
		if v == "" {
			return false
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			envErrs[flagName] = fmt.Errorf("%s=%q: must be true or false", name, v)
		}
		return b
	}
	envDuration := func(flagName, name string) time.Duration {
		v := env(name, "")
		if v == "" {
			return 0
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			envErrs[flagName] = fmt.Errorf("%s=%q: must be a duration such as 250ms", name, v)
		}
		return d
	}
	var planArg string
	fs := flag.NewFlagSet("platformsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&addr, "addr", env("ATMOST_SIM_ADDR", "127.0.0.1:9300"), "address to serve on; 127.0.0.1:0 picks a free port (env ATMOST_SIM_ADDR)")
	fs.DurationVar(&cfg.Latency, "latency", envDuration("latency", "ATMOST_SIM_LATENCY"), "added to every create before it commits (env ATMOST_SIM_LATENCY; 0 when unset)")
	fs.DurationVar(&cfg.ListLag, "list-lag", envDuration("list-lag", "ATMOST_SIM_LIST_LAG"), "how long a new object stays out of the account listing (env ATMOST_SIM_LIST_LAG; 0 when unset)")
	fs.BoolVar(&cfg.StatusLookup, "status-lookup", envBool("status-lookup", "ATMOST_SIM_STATUS_LOOKUP"), "serve GET /v1/idempotency/{key}, the status lookup that can prove not-sent (env ATMOST_SIM_STATUS_LOOKUP; false when unset)")
	fs.BoolVar(&cfg.Dedupe, "dedupe", envBool("dedupe", "ATMOST_SIM_DEDUPE"), "answer a repeated Idempotency-Key with its first object instead of creating another; off, a double send shows as two objects (env ATMOST_SIM_DEDUPE; false when unset)")
	fs.StringVar(&planArg, "plan", env("ATMOST_SIM_PLAN", ""), `fault plan: a JSON file, or inline JSON such as '{"seed":1,"rates":{"drop_after_commit":0.01}}'; (env ATMOST_SIM_PLAN; no faults when unset)`)
	showVersion := fs.Bool("version", false, "print the version of this binary and exit")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: platformsim [flags]\n\n"+
			"Serves a simulated social platform that counts, per Idempotency-Key, the objects it created\n"+
			"(GET /v1/counts) and injects the faults of a plan (GET and PUT /v1/plan).\n"+
			"Fault kinds: ok, drop_before_read, drop_after_read, drop_after_commit, error_after_commit,\n"+
			"delay, rate_limited, reject.\n"+
			"Every flag has an environment variable; the flag wins.\n\nFlags:")
		flaghelp.PrintDefaults(stderr, fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, addr, 0
		}
		return cfg, addr, 2
	}
	if *showVersion {
		fmt.Fprintf(os.Stdout, "platformsim %s\n", version.String())
		return cfg, addr, 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "platformsim: unexpected argument %q\n", fs.Arg(0))
		return cfg, addr, 2
	}
	fs.Visit(func(f *flag.Flag) { delete(envErrs, f.Name) })
	for _, name := range []string{"latency", "list-lag", "status-lookup", "dedupe"} {
		if err := envErrs[name]; err != nil {
			fmt.Fprintf(stderr, "platformsim: %v\n", err)
			return cfg, addr, 2
		}
	}
	if planArg != "" {
		p, err := loadPlan(planArg)
		if err != nil {
			fmt.Fprintf(stderr, "platformsim: --plan: %v\n", err)
			return cfg, addr, 2
		}
		cfg.Plan = p
	}
	if err := cfg.validate(); err != nil {
		fmt.Fprintf(stderr, "platformsim: %v\n", err)
		return cfg, addr, 2
	}
	return cfg, addr, -1
}

// loadPlan reads a plan given inline (it starts with "{") or as the path of a JSON file.
func loadPlan(arg string) (Plan, error) {
	data := []byte(arg)
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		b, err := os.ReadFile(arg)
		if err != nil {
			return Plan{}, fmt.Errorf("reading the plan file: %w", err)
		}
		data = b
	}
	return ParsePlan(data)
}
