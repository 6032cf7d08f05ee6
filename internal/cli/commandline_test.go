package cli_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
)

// argSamples are values for the positional arguments commands declare, by name: a new name
// needs one here, or the walk below fails.
var argSamples = map[string]string{
	"KEY":     "dk1:" + strings.Repeat("ab", 32),
	"ACCOUNT": "acct-1",
	"NAME":    "carol",
}

// flagSample is a value the flag package accepts for a flag of kind.
func flagSample(t *testing.T, f cli.DeclaredFlag) []string {
	t.Helper()
	switch f.Kind {
	case "bool":
		return []string{"--" + f.Name}
	case "int", "int64", "float64":
		return []string{"--" + f.Name, "1"}
	case "time.Duration":
		return []string{"--" + f.Name, "1s"}
	case "string", "[]string":
		return []string{"--" + f.Name, "x"}
	}
	t.Fatalf("--%s: no sample for a flag of kind %s", f.Name, f.Kind)
	return nil
}

// errorObject reads stderr as the one JSON object an error is with --json.
func errorObject(t *testing.T, stderr string, context ...any) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.Len(t, lines, 1, context...)
	var obj map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &obj), context...)
	require.NotEmpty(t, obj["error"], context...)
	return obj
}

var (
	singleDashFlag = regexp.MustCompile(`(?m)^\s+-[a-z]`)
	usageFlag      = regexp.MustCompile(`--([a-z][a-z0-9-]*)`)
)

// Every command and subcommand of the declaration, a new one included: --help exits 0 and lists
// every flag it takes, as --name; its usage lines name exactly those flags; every flag its help
// lists is accepted; an unknown flag, a missing argument, a missing required flag and an extra
// argument each exit 2 naming the problem, as a JSON object with --json. Nothing here reaches a
// database: each command line ends before the command runs.
func TestEveryCommandLineExitsWithTheDocumentedCode(t *testing.T) {
	t.Parallel()
	cmds := cli.DeclaredCommands()
	require.Greater(t, len(cmds), 20)
	for _, d := range cmds {
		path := d.Path
		name := "atmost " + strings.Join(path, " ")
		with := func(args ...string) []string { return append(append([]string{}, path...), args...) }

		res := run(nil, with("--help")...)
		require.Equal(t, cli.ExitOK, res.code, "%s --help: %s", name, res.stderr)
		require.Equal(t, cli.ExitOK, run(nil, with("help")...).code, "%s help", name)
		require.Empty(t, res.stderr, "%s --help writes its help on standard output", name)
		require.Contains(t, res.stdout, "Usage:", name)
		require.NotRegexp(t, singleDashFlag, res.stdout, "%s --help spells a flag -name", name)
		for _, f := range d.Flags {
			require.Contains(t, res.stdout, "\n  --"+f.Name, "%s --help lists --%s", name, f.Name)
		}
		for _, s := range d.Subs {
			require.Contains(t, res.stdout, "\n  "+s+" ", "%s --help lists its subcommand %s", name, s)
		}

		if !d.Runs {
			// A group: without a subcommand, or with an unknown one, a usage error.
			res = run(nil, path...)
			require.Equal(t, cli.ExitUsage, res.code, name)
			res = run(nil, with("nosuch")...)
			require.Equal(t, cli.ExitUsage, res.code, name)
			require.Contains(t, res.stderr, `unknown command "nosuch"`, name)
			res = run(nil, with("nosuch", "--json")...)
			require.Equal(t, cli.ExitUsage, res.code, name)
			require.EqualValues(t, cli.ExitUsage, errorObject(t, res.stderr, name)["code"], name)
			continue
		}

		// The usage lines name exactly the declared flags.
		declared := map[string]bool{}
		for _, f := range d.Flags {
			declared[f.Name] = true
		}
		named := map[string]bool{}
		for _, m := range usageFlag.FindAllStringSubmatch(strings.Join(d.Usage, " "), -1) {
			named[m[1]] = true
			require.True(t, declared[m[1]], "%s: its usage names --%s, which it does not take", name, m[1])
		}
		for f := range declared {
			require.True(t, named[f], "%s: its usage does not name --%s", name, f)
		}

		var args, required []string
		for _, a := range d.Args {
			sample, ok := argSamples[a]
			require.True(t, ok, "%s: no sample for the argument %s (add one to argSamples)", name, a)
			args = append(args, sample)
		}
		for _, f := range d.Flags {
			if f.Required {
				required = append(required, flagSample(t, f)...)
			}
		}
		hasJSON := declared["json"]

		// Every flag the help lists is one the command takes: the line parses up to --help.
		all := slices.Clone(args)
		for _, f := range d.Flags {
			all = append(all, flagSample(t, f)...)
		}
		res = run(nil, with(append(all, "--help")...)...)
		require.Equal(t, cli.ExitOK, res.code, "%s %v --help: %s", name, all, res.stderr)

		// An unknown flag.
		res = run(nil, with(append(slices.Clone(args), "--no-such-flag")...)...)
		require.Equal(t, cli.ExitUsage, res.code, name)
		require.Contains(t, res.stderr, "--no-such-flag: not a flag of "+path[len(path)-1], name)
		if hasJSON {
			res = run(nil, with(append(slices.Clone(args), "--json", "--no-such-flag")...)...)
			require.Equal(t, cli.ExitUsage, res.code, name)
			obj := errorObject(t, res.stderr, name)
			require.EqualValues(t, cli.ExitUsage, obj["code"], name)
			require.Equal(t, name, obj["command"])
			require.Contains(t, obj["error"], "--no-such-flag")
		}

		// A missing argument.
		if len(args) > 0 {
			res = run(nil, with(required...)...)
			require.Equal(t, cli.ExitUsage, res.code, "%s without %v: %s", name, d.Args, res.stderr)
			require.Contains(t, res.stderr, "give the "+d.Args[0], name)
			res = run(nil, with()...)
			require.Equal(t, cli.ExitUsage, res.code, "%s alone", name)
			if hasJSON {
				res = run(nil, with(append(slices.Clone(required), "--json")...)...)
				require.Equal(t, cli.ExitUsage, res.code, name)
				require.EqualValues(t, cli.ExitUsage, errorObject(t, res.stderr, name)["code"], name)
			}
		}

		// Each missing required flag.
		for _, f := range d.Flags {
			if !f.Required {
				continue
			}
			line := slices.Clone(args)
			for _, g := range d.Flags {
				if g.Required && g.Name != f.Name {
					line = append(line, flagSample(t, g)...)
				}
			}
			res = run(nil, with(line...)...)
			require.Equal(t, cli.ExitUsage, res.code, "%s without --%s: %s", name, f.Name, res.stderr)
			require.Contains(t, res.stderr, "--"+f.Name+" is required", name)
			if hasJSON {
				res = run(nil, with(append(line, "--json")...)...)
				require.Equal(t, cli.ExitUsage, res.code, name)
				require.Contains(t, errorObject(t, res.stderr, name)["error"], "--"+f.Name+" is required", name)
			}
		}

		// An argument too many.
		res = run(nil, with(append(append(slices.Clone(args), required...), "surplus")...)...)
		require.Equal(t, cli.ExitUsage, res.code, "%s surplus: %s", name, res.stderr)
		require.Contains(t, res.stderr, `unexpected argument "surplus"`, name)
	}
}

// atmost itself: its help with the exit codes, an unknown command, nothing at all.
func TestAtmostItselfExitsWithTheDocumentedCode(t *testing.T) {
	t.Parallel()
	res := run(nil, "--help")
	require.Equal(t, cli.ExitOK, res.code)
	require.Contains(t, res.stdout, "Exit codes:\n  0  done\n  1  refused or failed")
	require.Contains(t, res.stdout, "\n  2  usage: ")
	for _, d := range cli.DeclaredCommands() {
		if len(d.Path) == 1 {
			require.Contains(t, res.stdout, "\n  "+d.Path[0]+" ", "atmost --help lists %s", d.Path[0])
		}
	}
	require.Equal(t, cli.ExitUsage, run(nil).code)
	res = run(nil, "frobnicate")
	require.Equal(t, cli.ExitUsage, res.code)
	require.Contains(t, res.stderr, `unknown command "frobnicate"`)
	res = run(nil, "frobnicate", "--json")
	require.Equal(t, cli.ExitUsage, res.code)
	obj := errorObject(t, res.stderr)
	require.EqualValues(t, cli.ExitUsage, obj["code"])
	require.Equal(t, "atmost", obj["command"])
	require.Contains(t, obj["error"], `unknown command "frobnicate"`)
	// --json as the value of another flag asks for no JSON: the error is text.
	res = run(nil, "switch", "on", "--reason", "--json", "--account", "")
	require.Equal(t, cli.ExitUsage, res.code)
	require.True(t, strings.HasPrefix(res.stderr, "atmost switch on: --account is empty"), res.stderr)
	res = run(nil, "help", "switch", "on")
	require.Equal(t, cli.ExitOK, res.code)
	require.Contains(t, res.stdout, "atmost switch on [--account A] --reason TEXT")
	res = run(nil, "help", "switch", "sideways")
	require.Equal(t, cli.ExitUsage, res.code)
}
