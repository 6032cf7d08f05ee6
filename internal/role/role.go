package role

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/atmost/atmost/internal/flaghelp"
	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/internal/version"
)

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
