// Package role is what every atmost role process shares: configuration from the environment
// with flags that override it, the connections to PostgreSQL and NATS (waiting with backoff at
// start-up), the readiness checks, and the exit-code convention (0 clean, 1 fatal, 2 usage).
package role

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/atmost/atmost/internal/flaghelp"
	"github.com/atmost/atmost/internal/serve"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/internal/version"
)

// DefaultDatabaseURL is the ledger every role uses when ATMOST_DATABASE_URL is unset.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/atmost?sslmode=disable"

// Env reads settings from the environment; a variable set to "" counts as unset.
type Env func(name string) (string, bool)

// String returns the variable's value or def.
func (e Env) String(name, def string) string {
	if v, ok := e(name); ok && v != "" {
		return v
	}
	return def
}

// Int returns the variable as an integer, or def when it is unset or not one (the flag's
// validation then reports the default it used).
func (e Env) Int(name string, def int) int {
	if n, err := strconv.Atoi(e.String(name, "")); err == nil {
		return n
	}
	return def
}

// Bool returns the variable as a boolean ("true", "false", "1", "0"), or def.
func (e Env) Bool(name string, def bool) bool {
	if b, err := strconv.ParseBool(e.String(name, "")); err == nil {
		return b
	}
	return def
}

// Duration returns the variable as a duration ("30s"), or def.
func (e Env) Duration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(e.String(name, "")); err == nil {
		return d
	}
	return def
}

// envOfFlag finds the environment variable a flag's usage names: "(env ATMOST_...)".
var envOfFlag = regexp.MustCompile(`\(env (ATMOST_[A-Z0-9_]+)\)`)

// Common is the configuration every role has.
type Common struct {
	DatabaseURL string // ATMOST_DATABASE_URL
	NATSURL     string // ATMOST_NATS_URL
	HTTPAddr    string // ATMOST_HTTP_ADDR
	Replicas    int    // ATMOST_STREAM_REPLICAS
	Isolation   string // ATMOST_LEDGER_ISOLATION
	LogLevel    string // ATMOST_LOG_LEVEL
	Instance    string // ATMOST_INSTANCE; "" is DefaultInstance
	// Traces are the tracing settings, from the standard OTEL_ variables alone (no flags).
	Traces tracing.Settings
}

// Register declares the common flags on fs, with defaults from env; httpAddr is the role's
// default address for /healthz, /readyz and /metrics.
func (c *Common) Register(fs *flag.FlagSet, env Env, httpAddr string) {
	fs.StringVar(&c.DatabaseURL, "database-url", env.String("ATMOST_DATABASE_URL", DefaultDatabaseURL), "the ledger (env ATMOST_DATABASE_URL)")
	fs.StringVar(&c.NATSURL, "nats-url", env.String("ATMOST_NATS_URL", nats.DefaultURL), "the NATS server (env ATMOST_NATS_URL)")
	fs.StringVar(&c.HTTPAddr, "http", env.String("ATMOST_HTTP_ADDR", httpAddr), "address of /healthz, /readyz and /metrics (env ATMOST_HTTP_ADDR)")
	fs.IntVar(&c.Replicas, "replicas", env.Int("ATMOST_STREAM_REPLICAS", 1), "replicas of the streams this role creates: 1, or 3 in a cluster (env ATMOST_STREAM_REPLICAS)")
	fs.StringVar(&c.Isolation, "isolation", env.String("ATMOST_LEDGER_ISOLATION", "serializable"), "ledger transaction isolation: serializable or read-committed, the faster on PostgreSQL (env ATMOST_LEDGER_ISOLATION)")
	fs.StringVar(&c.LogLevel, "log-level", env.String("ATMOST_LOG_LEVEL", "info"), "the least level logged: debug, info, warn or error (env ATMOST_LOG_LEVEL)")
	fs.StringVar(&c.Instance, "instance", env.String("ATMOST_INSTANCE", ""), "names this process in history and events as <role>/<instance>: letters, digits, '.', '_' and '-', at most 128; empty: <host>-<pid> (env ATMOST_INSTANCE)")
	fs.Bool(versionFlag, false, "print the version of this binary and exit")
	c.Traces = tracing.FromEnv(env)
}

// versionFlag is every role's --version; Parse answers it before anything else is checked.
const versionFlag = "version"

// Stdout is where --version prints (a variable for the tests of the roles).
var Stdout io.Writer = os.Stdout

// Validate checks the common settings.
func (c Common) Validate() error {
	if c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5 {
		return fmt.Errorf("replicas %d: must be 1, 3 or 5", c.Replicas)
	}
	if _, err := zapcore.ParseLevel(c.LogLevel); err != nil {
		return fmt.Errorf("log level %q: must be debug, info, warn or error", c.LogLevel)
	}
	if c.Instance != "" && !instanceName.MatchString(c.Instance) {
		return fmt.Errorf("instance %q: must be 1-128 letters, digits, '.', '_' or '-', beginning with a letter or digit", c.Instance)
	}
	if err := c.Traces.Validate(); err != nil {
		return err
	}
	_, err := c.IsoLevel()
	return err
}

// instanceName is what an instance may be called: no '/', so an actor reads back as exactly one
// role and one instance, and nothing a log or a terminal would show otherwise.
var instanceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Actor is the name a role's process writes to every history row (and so to every event) and
// to every reconciliation step it makes: "<role>/<instance>", the instance being c.Instance or
// DefaultInstance. It is chosen once, at start, and is the same for the whole life of the
// process, so after an incident the history says which process held an intent. Two processes
// of one role on one host differ by their pid; two in one process (tests, atmost dev runs
// each role once) need an instance name each.
func (c Common) Actor(role string) string {
	instance := c.Instance
	if instance == "" {
		instance = DefaultInstance()
	}
	return role + "/" + instance
}

// DefaultInstance is the instance of a process whose ATMOST_INSTANCE is unset: its host name
// and pid, "<host>-<pid>", read once, at the first call, and the host name made to fit what an
// instance may hold.
var DefaultInstance = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	host = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, host)
	pid := "-" + strconv.Itoa(os.Getpid())
	if len(host)+len(pid) > 128 {
		host = host[:128-len(pid)]
	}
	return host + pid
})

// IsoLevel is the ledger's transaction isolation level.
func (c Common) IsoLevel() (pgx.TxIsoLevel, error) {
	switch c.Isolation {
	case "serializable":
		return pgx.Serializable, nil
	case "read-committed":
		return pgx.ReadCommitted, nil
	}
	return "", fmt.Errorf("isolation %q: must be serializable or read-committed", c.Isolation)
}

// Parse parses a role's command line, after holding every environment variable a flag names
// ("(env ATMOST_...)" in its usage) to that flag's parsing. It returns -1 when the role should
// run, otherwise the exit code: 0 for --help, 2 for a bad command line or environment (the
// message is on stderr).
func Parse(fs *flag.FlagSet, env Env, name, summary string, args []string, stderr io.Writer, validate func() error) int {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s [flags]\n\n%s\nEvery flag has an environment variable; the flag wins.\n\nFlags:\n", name, summary)
		flaghelp.PrintDefaults(stderr, fs)
		tracing.Usage(stderr)
	}
	// The environment is held to the flags' own parsing: a variable set to something its flag
	// would refuse is an error, never silently the default.
	var bad []string
	fs.VisitAll(func(f *flag.Flag) {
		m := envOfFlag.FindStringSubmatch(f.Usage)
		if m == nil {
			return
		}
		if v := env.String(m[1], ""); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				bad = append(bad, fmt.Sprintf("%s=%q: %v", m[1], v, err))
			}
		}
	})
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "%s: the environment: %s\n", name, strings.Join(bad, "; "))
		return 2
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if f := fs.Lookup(versionFlag); f != nil && f.Value.String() == "true" {
		fmt.Fprintf(Stdout, "%s %s\n", name, version.String())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	if err := validate(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	return -1
}

// Run runs a role with a JSON logger named after it, at the level of c.LogLevel, every line
// carrying the process's actor (Common.Actor) as history records it, and turns its
// result into the exit code: 0 after a clean stop, 1 on a fatal error.
func Run(ctx context.Context, name string, c Common, stderr io.Writer, run func(ctx context.Context, log *zap.Logger) error) int {
	level, err := zapcore.ParseLevel(c.LogLevel)
	if err != nil {
		level = zapcore.InfoLevel // Validate refused it already; a zero Common logs at info
	}
	log := LoggerAt(stderr, level).Named(name).With(zap.String("actor", c.Actor(name)))
	defer func() { _ = log.Sync() }()
	if err := run(ctx, log); err != nil {
		log.Error(name+" stopped", zap.Error(err))
		return 1
	}
	log.Info(name + " stopped cleanly")
	return 0
}

// Logger returns the JSON logger every role writes to w (standard error), at info level.
func Logger(w io.Writer) *zap.Logger { return LoggerAt(w, zapcore.InfoLevel) }

// LoggerAt is Logger at another level.
func LoggerAt(w io.Writer, level zapcore.Level) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level), zap.ErrorOutput(zapcore.Lock(zapcore.AddSync(w))))
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

// Retry runs op until it succeeds or ctx ends, doubling its pause up to 10 s. An incompatible
// stream or a server too old is returned at once: waiting will not fix it.
func Retry(ctx context.Context, log *zap.Logger, what string, op func() error) error {
	pause := 100 * time.Millisecond
	for {
		err := op()
		if err == nil {
			return nil
		}
		if errors.Is(err, streams.ErrIncompatible) || errors.Is(err, streams.ErrServerTooOld) {
			return err
		}
		log.Warn(what+" failed; retrying", zap.Error(err), zap.Duration("in", pause))
		if !Sleep(ctx, pause) {
			return fmt.Errorf("%s: %w (gave up: %v)", what, err, ctx.Err())
		}
		pause = min(2*pause, 10*time.Second)
	}
}

// Sleep pauses for d, or until ctx ends; it reports whether the pause ran out.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
