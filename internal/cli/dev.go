package cli

import (
	"context"
	"errors"
	"fmt"
	stdio "io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/internal/dev"
	"github.com/atmost/atmost/internal/redact"
	"github.com/atmost/atmost/internal/tools/platformsim"
)

func devCommand() *Command {
	var natsURL, dataDir, simAddr, logFile, consoleAddr string
	var natsPort, basePort int
	roleAddrs := map[string]*string{}
	return &Command{Name: "dev", Summary: "every role in one process, with an embedded NATS unless ATMOST_NATS_URL is set (the ledger is created and migrated)",
		About: `Runs ingest, the dispatcher, the sweeper and the reconciler in one process until interrupted.
Every role reads its own settings from the environment (see each role's --help), except its
HTTP address: each role serves /healthz, /readyz and /metrics on its own, ingest on
--http-base-port and the others on the next ports (ATMOST_HTTP_ADDR, one role's address, is not
used), or where its --ROLE-http-addr says. The operator console serves on --console, with
$` + console.TokenVariable + ` as its bootstrap token, or one made for the run and printed. Every
address is checked before anything starts.`,
		Flags: func(f *Flags) {
			f.Ledger("the ledger; created and migrated when needed")
			f.String(&natsURL, "nats-url", "URL", "", "a running NATS server with JetStream; empty starts an embedded one").Env("ATMOST_NATS_URL")
			f.Int(&natsPort, "nats-port", "PORT", 4222, "the embedded NATS server's client port (0: any free port)")
			f.String(&dataDir, "data-dir", "DIR", "", "where the embedded NATS server keeps its streams").Env("ATMOST_DEV_DATA_DIR").Default(defaultDataDir())
			f.Int(&basePort, "http-base-port", "PORT", dev.DefaultHTTPBasePort, "ingest's HTTP port on 127.0.0.1; the dispatcher, the sweeper and the reconciler take the next three")
			for _, role := range dev.Roles {
				roleAddrs[role] = new(string)
				f.String(roleAddrs[role], role+"-http-addr", "ADDR", "", "the "+role+"'s /healthz, /readyz and /metrics address (default: from --http-base-port)")
			}
			f.String(&simAddr, "sim", "ADDR", DefaultSimAddr, "serve the platform simulator here (empty: none); a ledger without accounts gets the account "+dev.SimAccount+" on it")
			f.String(&logFile, "log", "FILE", "", "write the roles' JSON logs to this file instead of standard error")
			f.String(&consoleAddr, "console", "ADDR", console.DefaultListen, "serve the operator console here (empty: none); its token is $"+console.TokenVariable+", or one made for the run")
		},
		Run: func(ctx context.Context, c *line) int {
			if dataDir == "" {
				dataDir = defaultDataDir()
			}
			if basePort < 1 || basePort > 65535-len(dev.Roles)+1 {
				return c.usageError("--http-base-port %d: give a port from 1 to %d", basePort, 65535-len(dev.Roles)+1)
			}
			addrs := dev.HTTPAddrs(basePort)
			for role, addr := range roleAddrs {
				if *addr == "" {
					continue
				}
				if _, _, err := net.SplitHostPort(*addr); err != nil {
					return c.usageError("--%s-http-addr %q: give HOST:PORT (127.0.0.1:9201, or :0 for any free port)", role, *addr)
				}
				addrs[role] = *addr
			}
			return runDev(ctx, c, dev.Options{DatabaseURL: c.databaseURL, NATSURL: natsURL, NATSPort: natsPort, DataDir: dataDir, HTTPAddrs: addrs,
				Console: consoleAddr, ConsoleToken: setting(c.io.Env, console.TokenVariable, "")}, simAddr, logFile)
		},
	}
}

// DefaultSimAddr is where `atmost dev` serves the platform simulator unless --sim moves it.
const DefaultSimAddr = "127.0.0.1:9300"

func runDev(ctx context.Context, c *line, opts dev.Options, simAddr, logFile string) int {
	io := c.io
	// Every address before anything starts: a busy port is named, with the flag that moves it.
	wanted := maps.Clone(opts.HTTPAddrs)
	if opts.NATSURL == "" && opts.NATSPort != 0 {
		wanted[dev.EmbeddedNATS] = net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.NATSPort))
	}
	if simAddr != "" {
		wanted[simulator] = simAddr
	}
	if opts.Console != "" {
		wanted[dev.Console] = opts.Console
	}
	if err := dev.CheckFree(wanted); err != nil {
		var busy *dev.BusyError
		if errors.As(err, &busy) {
			return c.problem(ExitError, err.Error()+"; "+movesIt(busy.Name))
		}
		return c.fail(err)
	}
	logs := io.Stderr
	if logFile != "" {
		f, err := os.OpenFile(logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return c.usageError("--log: %v", err)
		}
		defer f.Close()
		logs = f
	}
	if simAddr != "" {
		s, err := platformsim.New(platformsim.Config{})
		if err != nil {
			return c.problem(ExitError, fmt.Sprintf("platform simulator: %v", err))
		}
		url, _, err := s.Serve(ctx, simAddr)
		if err != nil {
			return c.problem(ExitError, fmt.Sprintf("platform simulator on %s: %v", simAddr, err))
		}
		fmt.Fprintf(io.Stdout, "platform simulator: %s (GET /v1/counts)\n", url)
		opts.SimURL = url
	}
	if setting(io.Env, "ATMOST_HTTP_ADDR", "") != "" {
		c.note("ATMOST_HTTP_ADDR is one role's address and is not used: each role serves on its own (--http-base-port, --ROLE-http-addr)")
	}
	opts.Env, opts.Logs = io.Env, logs
	stack, err := dev.Start(ctx, opts)
	if err != nil {
		return c.fail(err)
	}
	migrated := ""
	if n := len(stack.Applied); n > 0 {
		migrated = fmt.Sprintf(" (%d %s applied, up to %s)", n, plural(n, "migration", "migrations"), stack.Applied[n-1].Name)
	}
	nats := stack.NATSURL + " (embedded, streams in " + opts.DataDir + ")"
	if opts.NATSURL != "" {
		nats = redact.URL(stack.NATSURL)
	}
	fmt.Fprintf(io.Stdout, "ledger: %s%s\nNATS: %s\n", redact.URL(stack.DatabaseURL), migrated, nats)
	if stack.ConsoleURL != "" {
		fmt.Fprintf(io.Stdout, "console: %s\n", stack.ConsoleURL)
		if stack.ConsoleToken != "" {
			fmt.Fprintf(io.Stdout, "console token for this run (logs in as console:bootstrap): %s\n", stack.ConsoleToken)
		}
	}
	roles := make([]string, len(dev.Roles))
	for i, role := range dev.Roles {
		roles[i] = role + " " + opts.HTTPAddrs[role]
	}
	fmt.Fprintf(io.Stdout, "roles (/healthz, /readyz and /metrics): %s\n", strings.Join(roles, ", "))
	if api := setting(io.Env, "ATMOST_INGEST_HTTP_API", ""); api != "" {
		// ingest reads it as it reads every setting of its own: say where producers find it.
		fmt.Fprintf(io.Stdout, "producers' HTTP API (ATMOST_INGEST_HTTP_API): http://%s (a token: bin/atmost producers add NAME --account ACCOUNT --reason WHY)\n", api)
	}
	nextSteps(io.Stdout, stack, opts, simAddr)
	fmt.Fprintln(io.Stdout, "running; Ctrl-C stops every role cleanly")
	select {
	case <-ctx.Done():
	case <-stack.Failed():
	}
	if err := stack.Stop(); err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(io.Stdout, "stopped")
	return ExitOK
}

// nextSteps prints what a newcomer does next, in another terminal: the exports that point
// atmost's commands and the examples at this stack when it is not where they look by default,
// then the first intent of their own, its events and the console. README.md shows the same
// lines, and a test runs them from there.
func nextSteps(w stdio.Writer, stack *dev.Stack, opts dev.Options, simAddr string) {
	// Only the embedded server's URL: one given to dev is the user's, and may hold a password.
	export := opts.NATSURL == "" && stack.NATSURL != DefaultNATSURL
	if stack.SimAccount == "" {
		if simAddr == "" {
			fmt.Fprintf(w, "no account %s: --sim %s serves the platform simulator, and a ledger without accounts gets %s on it\n",
				dev.SimAccount, DefaultSimAddr, dev.SimAccount)
		}
		if export {
			// atmost's commands and producers look at the default URL; without this line they
			// would read another NATS, or none.
			fmt.Fprintf(w, "in another terminal, for atmost's commands and your producers:\n  export ATMOST_NATS_URL=%s\n", stack.NATSURL)
		}
		return
	}
	if stack.SimAccountCreated {
		fmt.Fprintf(w, "account %s: created on the platform simulator (this ledger had no account)\n", dev.SimAccount)
	}
	fmt.Fprintln(w, "next, in another terminal, in this directory:")
	if export {
		fmt.Fprintf(w, "  export ATMOST_NATS_URL=%s\n", stack.NATSURL)
	}
	fmt.Fprintf(w, "  go run ./examples/producer -account %s -text \"my first intent\"   # publishes it and waits until it is published\n", dev.SimAccount)
	fmt.Fprintln(w, "  bin/atmost events tail   # its transitions, one line each (--follow keeps watching)")
	if stack.ConsoleURL != "" {
		how := "the console token above"
		if stack.ConsoleToken == "" {
			how = "$" + console.TokenVariable + " or an operator's token"
		}
		fmt.Fprintf(w, "and open the console at %s (log in with %s)\n", stack.ConsoleURL, how)
	}
}

// simulator names the platform simulator's address in a dev.BusyError.
const simulator = "the platform simulator (--sim)"

// movesIt says which flag of atmost dev moves what a dev.BusyError names.
func movesIt(name string) string {
	switch {
	case name == dev.EmbeddedNATS:
		return "give another --nats-port (0: any free one; atmost dev then prints the ATMOST_NATS_URL to export)"
	case name == simulator:
		return "give another --sim address"
	case name == dev.Console:
		return "give another --console address (empty: none)"
	}
	return fmt.Sprintf("move it with --%s-http-addr, or every role with --http-base-port", name)
}

// defaultDataDir is where `atmost dev` keeps its embedded NATS streams between runs: in the
// user's cache directory. Without one it is "", a directory of the run's own (dev.Options): a
// fixed name in a shared $TMPDIR could be another user's.
func defaultDataDir() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "atmost", "dev")
	}
	return ""
}

func demoCommand() *Command {
	var intents int
	var seed int64
	var timeout time.Duration
	var logFile, consoleAddr string
	var stay bool
	return &Command{Name: "demo", Summary: "the whole pipeline against a fault-injecting platform, a producer, a kill switch flipped mid-run, and the final count",
		About: `Runs every role with an embedded NATS server and the platform simulator with a fault plan,
publishes intents the way producers do (re-publishes, redeliveries, bad input, new occurrences),
flips the kill switch mid-run, and prints the count per state and reason and the platform's own count.`,
		Flags: func(f *Flags) {
			f.String(&f.c.databaseURL, "database-url", "URL", dev.DemoDatabaseURL, "the demo's database, dropped and created afresh on each run; one it did not create is refused").Env("ATMOST_DEMO_DATABASE_URL")
			f.Int(&intents, "intents", "N", dev.DefaultDemoIntents, "messages the producer publishes (bad input and re-publishes included)")
			f.Int64(&seed, "seed", "N", dev.DefaultDemoSeed, "seed of the producer's choices and the platform's faults")
			f.Duration(&timeout, "timeout", "D", dev.DefaultDemoTimeout, "how long to wait for every intent to settle")
			f.String(&logFile, "log", "FILE", "", "the roles' JSON logs (default: a new file in $TMPDIR for each run, named at the start)")
			f.String(&consoleAddr, "console", "ADDR", console.DefaultListen, "serve the operator console here while the demo runs (empty: none); its token is $"+console.TokenVariable+", or one made for the run")
			f.Bool(&stay, "stay", "after the final count, keep every role and the console running until interrupted (make demo sets it on a terminal)")
		},
		Run: func(ctx context.Context, c *line) int {
			if intents < 10 || timeout <= 0 {
				return c.usageError("--intents must be at least 10 and --timeout positive")
			}
			// A file of its own per run: a fixed name in a shared $TMPDIR is a file another user
			// may have put there first, or a link to one of the runner's files.
			f, err := os.CreateTemp("", "atmost-demo-*.log")
			if logFile != "" {
				f, err = os.Create(logFile)
			}
			if err != nil {
				return c.usageError("--log: %v", err)
			}
			defer f.Close()
			fmt.Fprintf(c.io.Stdout, "atmost demo: the roles log to %s\n", f.Name())
			r, err := dev.Demo(ctx, dev.DemoOptions{DatabaseURL: c.databaseURL, Intents: intents, Seed: seed, Timeout: timeout, Out: c.io.Stdout, Logs: f,
				Console: consoleAddr, ConsoleToken: setting(c.io.Env, console.TokenVariable, ""), Stay: stay})
			if err != nil {
				return c.fail(err)
			}
			if !r.OK() {
				return ExitError
			}
			return ExitOK
		},
	}
}
