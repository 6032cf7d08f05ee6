package role

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"go.uber.org/zap/zapcore"

	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/tracing"
)

// DefaultDatabaseURL is the ledger every role uses when ATMOST_DATABASE_URL is unset.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/atmost?sslmode=disable"

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
	fs.IntVar(&c.Replicas, "replicas", env.Int("ATMOST_STREAM_REPLICAS", streams.DefaultReplicas), "replicas of the streams this role creates: 1, or 3 in a cluster (env ATMOST_STREAM_REPLICAS)")
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
