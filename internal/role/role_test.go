package role_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/internal/version"
)

func parse(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var c role.Common
	fs := flag.NewFlagSet("somerole", flag.ContinueOnError)
	getenv := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	c.Register(fs, role.Env(getenv), "127.0.0.1:0")
	var out, errs bytes.Buffer
	role.Stdout = &out
	code = role.Parse(fs, role.Env(getenv), "somerole", "A role.", args, &errs, func() error { return c.Validate() })
	return code, out.String(), errs.String()
}

// --version answers on standard output and exits 0 before anything else is checked, so it
// works on a machine with nothing configured.
func TestEveryRoleAnswersVersion(t *testing.T) {
	code, stdout, _ := parse(t, map[string]string{"ATMOST_LEDGER_ISOLATION": "snapshot"}, "--version")
	require.Equal(t, 0, code)
	require.Equal(t, "somerole "+version.String()+"\n", stdout)
}

// The log level comes from ATMOST_LOG_LEVEL or --log-level; a level zap does not know is a
// bad command line (exit 2) that names it, never a silent default.
func TestTheLogLevelIsChecked(t *testing.T) {
	for _, level := range []string{"debug", "info", "warn", "error"} {
		code, _, stderr := parse(t, map[string]string{"ATMOST_LOG_LEVEL": level})
		require.Equal(t, -1, code, "%s: %s", level, stderr)
	}
	code, _, stderr := parse(t, nil, "--log-level", "loud")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `log level "loud"`)
	code, _, stderr = parse(t, map[string]string{"ATMOST_LOG_LEVEL": "verbose"})
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "verbose")
}
