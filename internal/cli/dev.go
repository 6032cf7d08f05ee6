package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	stdio "io"
	"os"
	"path/filepath"
	"time"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/internal/dev"
	"github.com/atmost/atmost/internal/tools/platformsim"
)

func init() {
	commands["dev"] = command{"every role in one process, with an embedded NATS unless ATMOST_NATS_URL is set (the ledger is created and migrated)", runDev}
	commands["demo"] = command{"the whole pipeline against a fault-injecting platform, a producer, a kill switch flipped mid-run, and the final count", runDemo}
}

func runDev(ctx context.Context, io IO, args []string) int {
	fs := flag.NewFlagSet("atmost dev", flag.ContinueOnError)
	fs.SetOutput(io.Stderr)
	databaseURL := fs.String("database-url", setting(io.Env, "ATMOST_DATABASE_URL", DefaultDatabaseURL), "the ledger; created and migrated when needed (env ATMOST_DATABASE_URL)")
	natsURL := fs.String("nats-url", setting(io.Env, "ATMOST_NATS_URL", ""), "a running NATS server with JetStream; empty starts an embedded one (env ATMOST_NATS_URL)")
	natsPort := fs.Int("nats-port", 4222, "the embedded NATS server's client port (0: any free port)")
	dataDir := fs.String("data-dir", setting(io.Env, "ATMOST_DEV_DATA_DIR", defaultDataDir()), "where the embedded NATS server keeps its streams (env ATMOST_DEV_DATA_DIR)")
	simAddr := fs.String("sim", "", "also serve the platform simulator on this address (e.g. 127.0.0.1:9300)")
	logFile := fs.String("log", "", "write the roles' JSON logs to this file instead of standard error")
	consoleAddr := fs.String("console", console.DefaultListen, "serve the operator console here (empty: none); its token is $"+console.TokenVariable)
	fs.Usage = func() {
		fmt.Fprintln(io.Stderr, "Usage: atmost dev [flags]\n\nRuns ingest, the dispatcher, the sweeper and the reconciler in one process until interrupted.")
		fmt.Fprintln(io.Stderr, "Every role reads its own settings from the environment (see each role's --help).\n\nFlags:")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(io.Stderr, "atmost dev: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	logs := io.Stderr
	if *logFile != "" {
		f, err := os.OpenFile(*logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintf(io.Stderr, "atmost dev: --log: %v\n", err)
			return ExitUsage
		}
		defer f.Close()
		logs = f
	}
	if *simAddr != "" {
		s, err := platformsim.New(platformsim.Config{})
		if err != nil {
			fmt.Fprintf(io.Stderr, "atmost dev: platform simulator: %v\n", err)
			return ExitError
		}
		url, _, err := s.Serve(ctx, *simAddr)
		if err != nil {
			fmt.Fprintf(io.Stderr, "atmost dev: platform simulator on %s: %v\n", *simAddr, err)
			return ExitError
		}
		fmt.Fprintf(io.Stdout, "platform simulator: %s (GET /v1/counts)\n", url)
	}
	stack, err := dev.Start(ctx, dev.Options{DatabaseURL: *databaseURL, NATSURL: *natsURL, NATSPort: *natsPort, DataDir: *dataDir,
		Env: io.Env, Logs: logs, Console: *consoleAddr, ConsoleToken: setting(io.Env, console.TokenVariable, "")})
	if err != nil {
		fmt.Fprintf(io.Stderr, "atmost dev: %v\n", err)
		return ExitError
	}
	for _, a := range stack.Applied {
		fmt.Fprintf(io.Stdout, "applied %s\n", a.Name)
	}
	nats := stack.NATSURL + " (embedded, streams in " + *dataDir + ")"
	if *natsURL != "" {
		nats = stack.NATSURL
	}
	fmt.Fprintf(io.Stdout, "ledger: %s\nNATS: %s\n", dev.Redact(stack.DatabaseURL), nats)
	if stack.ConsoleURL != "" {
		fmt.Fprintf(io.Stdout, "console: %s\n", stack.ConsoleURL)
	}
	fmt.Fprintln(io.Stdout, "roles: ingest, dispatcher, sweeper, reconciler (each role's /healthz, /readyz and /metrics at its ATMOST_HTTP_ADDR; defaults 127.0.0.1:9101-9104)")
	fmt.Fprintln(io.Stdout, "running; Ctrl-C stops every role cleanly")
	select {
	case <-ctx.Done():
	case <-stack.Failed():
	}
	if err := stack.Stop(); err != nil {
		fmt.Fprintf(io.Stderr, "atmost dev: %v\n", err)
		return ExitError
	}
	fmt.Fprintln(io.Stdout, "stopped")
	return ExitOK
}

// defaultDataDir is where `atmost dev` keeps its embedded NATS streams between runs.
func defaultDataDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "atmost", "dev")
	}
	return filepath.Join(os.TempDir(), "atmost-dev")
}

func runDemo(ctx context.Context, io IO, args []string) int {
	fs := flag.NewFlagSet("atmost demo", flag.ContinueOnError)
	fs.SetOutput(io.Stderr)
	databaseURL := fs.String("database-url", setting(io.Env, "ATMOST_DATABASE_URL", DefaultDatabaseURL),
		"a PostgreSQL server; the demo drops and creates its own database "+dev.DemoDatabase+" there (env ATMOST_DATABASE_URL)")
	intents := fs.Int("intents", 3000, "messages the producer publishes (bad input and re-publishes included)")
	seed := fs.Int64("seed", 1, "seed of the producer's choices and the platform's faults")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long to wait for every intent to settle")
	logFile := fs.String("log", filepath.Join(os.TempDir(), "atmost-demo.log"), "the roles' JSON logs")
	consoleAddr := fs.String("console", console.DefaultListen, "serve the operator console here while the demo runs (empty: none); its token is $"+console.TokenVariable)
	stay := fs.Bool("stay", false, "after the final count, keep every role and the console running until interrupted (make demo sets it on a terminal)")
	fs.Usage = func() {
		fmt.Fprintln(io.Stderr, "Usage: atmost demo [flags]\n\nRuns every role with an embedded NATS server and the platform simulator with a fault plan,")
		fmt.Fprintln(io.Stderr, "publishes intents the way producers do (re-publishes, redeliveries, bad input, new occurrences),")
		fmt.Fprintln(io.Stderr, "flips the kill switch mid-run, and prints the count per state and reason and the platform's own count.\n\nFlags:")
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(io.Stderr, "atmost demo: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	if *intents < 10 || *timeout <= 0 {
		fmt.Fprintln(io.Stderr, "atmost demo: --intents must be at least 10 and --timeout positive")
		return ExitUsage
	}
	var logs stdio.Writer = stdio.Discard
	if *logFile != "" {
		f, err := os.Create(*logFile)
		if err != nil {
			fmt.Fprintf(io.Stderr, "atmost demo: --log: %v\n", err)
			return ExitUsage
		}
		defer f.Close()
		logs = f
		fmt.Fprintf(io.Stdout, "atmost demo: the roles log to %s\n", *logFile)
	}
	r, err := dev.Demo(ctx, dev.DemoOptions{DatabaseURL: *databaseURL, Intents: *intents, Seed: *seed, Timeout: *timeout, Out: io.Stdout, Logs: logs,
		Console: *consoleAddr, ConsoleToken: setting(io.Env, console.TokenVariable, ""), Stay: *stay})
	if err != nil {
		fmt.Fprintf(io.Stderr, "atmost demo: %v\n", err)
		return ExitError
	}
	if !r.OK() {
		return ExitError
	}
	return ExitOK
}

// parseFlags parses args; done is true when the command must return code at once (--help,
// or a bad flag).
func parseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, true
		}
		return ExitUsage, true
	}
	return 0, false
}
