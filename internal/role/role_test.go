package role_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
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

// common parses a role's command line as parse does and returns the settings it read.
func common(t *testing.T, env map[string]string, args ...string) (role.Common, int, string) {
	t.Helper()
	var c role.Common
	fs := flag.NewFlagSet("somerole", flag.ContinueOnError)
	getenv := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	c.Register(fs, role.Env(getenv), "127.0.0.1:0")
	var errs bytes.Buffer
	code := role.Parse(fs, role.Env(getenv), "somerole", "A role.", args, &errs, func() error { return c.Validate() })
	return c, code, errs.String()
}

// A process names itself in history as <role>/<instance>: the instance ATMOST_INSTANCE or
// --instance names (the flag wins), else its host and pid. A name that would not read back as
// one instance is refused at start (exit 2), never written.
func TestTheInstanceNamesTheProcess(t *testing.T) {
	c, code, stderr := common(t, map[string]string{"ATMOST_INSTANCE": "blue"})
	require.Equal(t, -1, code, stderr)
	require.Equal(t, "somerole/blue", c.Actor("somerole"))
	c, code, stderr = common(t, map[string]string{"ATMOST_INSTANCE": "blue"}, "--instance", "eu-1.green_2")
	require.Equal(t, -1, code, stderr)
	require.Equal(t, "somerole/eu-1.green_2", c.Actor("somerole"))

	c, code, stderr = common(t, nil)
	require.Equal(t, -1, code, stderr)
	host, err := os.Hostname()
	require.NoError(t, err)
	want := fmt.Sprintf("%s-%d", host, os.Getpid())
	require.Equal(t, want, role.DefaultInstance())
	require.Equal(t, "somerole/"+want, c.Actor("somerole"))

	for _, bad := range []string{"a/b", "-lead", " padded", "tab\tin", "é", strings.Repeat("x", 129)} {
		_, code, stderr := common(t, nil, "--instance", bad)
		require.Equal(t, 2, code, "%q", bad)
		require.Contains(t, stderr, "instance", "%q", bad)
	}
	_, code, stderr = common(t, map[string]string{"ATMOST_INSTANCE": "x/y"})
	require.Equal(t, 2, code)
	require.Contains(t, stderr, `"x/y"`)
	_, code, _ = common(t, nil, "--instance", strings.Repeat("x", 128))
	require.Equal(t, -1, code, "128 characters are allowed")
}
