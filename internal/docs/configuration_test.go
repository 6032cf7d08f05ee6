package docs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/dispatch"
	"github.com/atmost/atmost/internal/ingest"
	"github.com/atmost/atmost/internal/platformsim"
	"github.com/atmost/atmost/internal/reconcile"
	"github.com/atmost/atmost/internal/sweep"
)

// noEnv is an empty environment: --help then prints the built-in defaults, whatever the
// machine running the test has set (make exports ATMOST_DATABASE_URL).
func noEnv(string) (string, bool) { return "", false }

// helpFlag is one flag as a binary's --help prints it.
type helpFlag struct {
	env     string // the variable the usage names, "(env ATMOST_X" or "$ATMOST_X"; "" for none
	def     string // the printed default, unquoted; "" when --help prints none (the zero value)
	printed bool   // whether --help printed a default
}

var (
	flagLine     = regexp.MustCompile(`^  -([a-z][a-z0-9-]*)`)
	flagEnv      = regexp.MustCompile(`(?:\(env |\$)(ATMOST_[A-Z0-9_]+)`)
	flagDefault  = regexp.MustCompile(`\(default (.*)\)$`)
	envVariable  = regexp.MustCompile(`\bATMOST_[A-Z0-9_]+\b`)
	envSection   = regexp.MustCompile(`(?m)^  (ATMOST_[A-Z0-9_]+) `)
	backtickFlag = regexp.MustCompile("`--([a-z][a-z0-9-]*)`")
	backtickEnv  = regexp.MustCompile("`(ATMOST_[A-Z0-9_]+)`")
)

// parseHelp reads the flags of a flag package's PrintDefaults output: "  -name type" followed by
// its usage on lines that start with a tab.
func parseHelp(help string) map[string]helpFlag {
	flags := map[string]helpFlag{}
	name, usage := "", ""
	done := func() {
		if name == "" {
			return
		}
		f := helpFlag{}
		if m := flagEnv.FindStringSubmatch(usage); m != nil {
			f.env = m[1]
		}
		if m := flagDefault.FindStringSubmatch(strings.TrimSpace(usage)); m != nil {
			f.def, f.printed = strings.Trim(m[1], `"`), true
		}
		flags[name] = f
	}
	for _, line := range strings.Split(help, "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			done()
			name, usage = m[1], ""
			continue
		}
		if strings.HasPrefix(line, "    \t") {
			usage += " " + strings.TrimSpace(line)
			continue
		}
		done()
		name = ""
	}
	done()
	return flags
}

// roleHelp returns what a role's --help prints.
func roleHelp(t *testing.T, bin string) string {
	t.Helper()
	ctx := context.Background()
	var out bytes.Buffer
	code := -1
	switch bin {
	case "ingest":
		code = ingest.Main(ctx, []string{"--help"}, noEnv, &out)
	case "dispatcher":
		code = dispatch.Main(ctx, []string{"--help"}, noEnv, &out)
	case "sweeper":
		code = sweep.Main(ctx, []string{"--help"}, noEnv, &out)
	case "reconciler":
		code = reconcile.Main(ctx, []string{"--help"}, noEnv, &out)
	case "platformsim":
		code = platformsim.Main(ctx, []string{"--help"}, noEnv, &out, &out)
	default:
		t.Fatalf("no help known for %s", bin)
	}
	require.Equal(t, 0, code, "%s --help:\n%s", bin, out.String())
	return out.String()
}

// cliHelp returns what `atmost args... --help` prints.
func cliHelp(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	code := cli.Run(context.Background(), cli.IO{Stdout: &out, Stderr: &out, Env: noEnv}, append(args, "--help"))
	require.Equal(t, 0, code, "atmost %s --help:\n%s", strings.Join(args, " "), out.String())
	return out.String()
}

// docRow is one row of a documentation table, by column name.
type docRow map[string]string

// section returns the part of a Markdown document under the heading whose anchor is given, up to
// the next heading of the same level or higher.
func section(t *testing.T, md, anchorName string) string {
	t.Helper()
	lines := strings.Split(md, "\n")
	start, level := -1, 0
	for i, line := range lines {
		m := headingLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if start >= 0 && len(m[1]) <= level {
			return strings.Join(lines[start:i], "\n")
		}
		if start < 0 && anchor(m[2]) == anchorName {
			start, level = i, len(m[1])
		}
	}
	require.GreaterOrEqual(t, start, 0, "no heading #%s", anchorName)
	return strings.Join(lines[start:], "\n")
}

// tables returns the rows of every table of a section, each keyed by its table's header.
func tables(md string) []docRow {
	var rows []docRow
	var header []string
	cells := func(line string) []string {
		parts := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts
	}
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			header = nil
			continue
		}
		c := cells(line)
		switch {
		case header == nil:
			header = c
		case strings.Trim(strings.Join(c, ""), "-: ") == "":
		default:
			row := docRow{}
			for i, name := range header {
				if i < len(c) {
					row[name] = c[i]
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// sameDefault reports whether a default as documented (a cell in backticks) is what --help
// printed: the same text, or the same duration spelled otherwise (60s and 1m0s); a default
// --help does not print is the zero value.
func sameDefault(doc string, help helpFlag) bool {
	if !help.printed {
		switch doc {
		case "0", "0s", "false", `""`:
			return true
		}
		return false
	}
	if doc == help.def {
		return true
	}
	a, errA := time.ParseDuration(doc)
	b, errB := time.ParseDuration(help.def)
	return errA == nil && errB == nil && a == b
}

// roleDocs are the sections of docs/configuration.md whose tables make up each binary's flags; a
// later section's row for a flag overrides an earlier one's.
var roleDocs = map[string][]string{
	"ingest":      {"every-role", "ingest"},
	"dispatcher":  {"every-role", "dispatcher"},
	"sweeper":     {"every-role", "sweeper"},
	"reconciler":  {"every-role", "reconciler"},
	"platformsim": {"platformsim"},
}

// roleMismatches compares the flag tables of doc's sections with a binary's --help: the same
// flags, each with the variable --help names, and the default --help prints wherever the
// documented default is a literal in backticks (prose such as "none" is allowed only where
// --help prints no default).
func roleMismatches(doc string, sections []string, help map[string]helpFlag, sectionOf func(string) string) []string {
	var out []string
	documented := map[string]docRow{}
	for _, s := range sections {
		for _, row := range tables(sectionOf(s)) {
			flags := backtickFlag.FindAllStringSubmatch(row["flag"], -1)
			if len(flags) != 1 {
				out = append(out, fmt.Sprintf("%s: a row names %d flags, not one: %q", doc, len(flags), row["flag"]))
				continue
			}
			documented[flags[0][1]] = row
		}
	}
	for name, row := range documented {
		h, ok := help[name]
		if !ok {
			out = append(out, fmt.Sprintf("%s documents --%s, which --help does not print", doc, name))
			continue
		}
		env := ""
		if m := backtickEnv.FindStringSubmatch(row["environment"]); m != nil {
			env = m[1]
		}
		if env != h.env {
			out = append(out, fmt.Sprintf("%s: --%s has variable %q, --help says %q", doc, name, env, h.env))
		}
		def, literal := row["default"], false
		if strings.HasPrefix(def, "`") && strings.HasSuffix(def, "`") && len(def) >= 2 {
			def, literal = strings.Trim(def, "`"), true
		}
		switch {
		case literal && !sameDefault(def, h):
			out = append(out, fmt.Sprintf("%s: --%s defaults to %q, --help says %q", doc, name, def, h.def))
		case !literal && h.printed:
			out = append(out, fmt.Sprintf("%s: --%s's default is %q, --help says %q", doc, name, row["default"], h.def))
		}
	}
	for name := range help {
		if _, ok := documented[name]; !ok {
			out = append(out, fmt.Sprintf("--help prints --%s, which %s does not list", name, doc))
		}
	}
	sort.Strings(out)
	return out
}

func configurationDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "configuration.md"))
	require.NoError(t, err)
	return string(b)
}

// Each role's flags, their variables and defaults, as docs/configuration.md lists them, are
// exactly what the role's --help prints.
func TestTheConfigurationPageListsEveryRolesFlags(t *testing.T) {
	doc := configurationDoc(t)
	for bin, sections := range roleDocs {
		help := parseHelp(roleHelp(t, bin))
		require.NotEmpty(t, help, "%s --help printed no flags", bin)
		require.Empty(t, roleMismatches("docs/configuration.md ("+bin+")", sections, help, func(a string) string { return section(t, doc, a) }), bin)
	}
}

// helpArgs is what to ask for each command's flags: a group whose own --help prints only its
// usage (accounts) prints its flags for a subcommand.
var helpArgs = map[string][]string{"accounts": {"accounts", "add"}}

// commandNames are the commands `atmost --help` lists.
func commandNames(t *testing.T) []string {
	t.Helper()
	help := cliHelp(t)
	_, list, ok := strings.Cut(help, "Commands:\n")
	require.True(t, ok, "atmost --help lists no commands:\n%s", help)
	list, _, _ = strings.Cut(list, "\n\n")
	var names []string
	for _, line := range strings.Split(list, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	require.NotEmpty(t, names)
	return names
}

// cliMismatches compares the atmost section of the configuration page with what every command
// prints: the command table lists each command's flags, no more and no fewer; the meaning table
// lists every flag once; the variables named anywhere in the section are those --help names.
func cliMismatches(doc string, helps map[string]string, topHelp string) []string {
	var out []string
	commands := map[string][]string{}
	meanings := map[string]int{}
	documentedEnv := map[string]bool{}
	for _, row := range tables(doc) {
		switch {
		case row["command"] != "":
			name := strings.Trim(row["command"], "`")
			for _, m := range backtickFlag.FindAllStringSubmatch(row["flags"], -1) {
				commands[name] = append(commands[name], m[1])
			}
		case row["flag"] != "":
			for _, m := range backtickFlag.FindAllStringSubmatch(row["flag"], -1) {
				meanings[m[1]]++
			}
		}
		for _, col := range []string{"variable", "environment"} {
			for _, m := range backtickEnv.FindAllStringSubmatch(row[col], -1) {
				documentedEnv[m[1]] = true
			}
		}
	}
	helpEnv := map[string]bool{}
	for _, m := range envSection.FindAllStringSubmatch(topHelp, -1) {
		helpEnv[m[1]] = true
	}
	all := map[string]bool{}
	for name, help := range helps {
		flags := parseHelp(help)
		if len(flags) == 0 {
			out = append(out, "atmost "+name+" --help prints no flags")
		}
		got := map[string]bool{}
		for _, f := range commands[name] {
			got[f] = true
		}
		for f, h := range flags {
			all[f] = true
			if !got[f] {
				out = append(out, fmt.Sprintf("atmost %s --help prints --%s, which the command table does not list", name, f))
			}
			if h.env != "" {
				helpEnv[h.env] = true
			}
		}
		for f := range got {
			if _, ok := flags[f]; !ok {
				out = append(out, fmt.Sprintf("the command table lists --%s for %s, which its --help does not print", f, name))
			}
		}
		for _, v := range envVariable.FindAllString(help, -1) {
			if strings.Contains(help, "(env "+v) || strings.Contains(help, "$"+v) {
				helpEnv[v] = true
			}
		}
	}
	for name := range commands {
		if _, ok := helps[name]; !ok {
			out = append(out, "the command table lists "+name+", which atmost --help does not")
		}
	}
	for f := range all {
		if meanings[f] != 1 {
			out = append(out, fmt.Sprintf("the meaning table lists --%s %d times, not once", f, meanings[f]))
		}
	}
	for f := range meanings {
		if !all[f] {
			out = append(out, "the meaning table lists --"+f+", which no command prints")
		}
	}
	for v := range helpEnv {
		if !documentedEnv[v] {
			out = append(out, "--help names "+v+", which the page does not list")
		}
	}
	for v := range documentedEnv {
		if !helpEnv[v] {
			out = append(out, "the page lists "+v+", which no --help names")
		}
	}
	sort.Strings(out)
	return out
}

// The atmost section lists exactly the commands, flags and variables the operator command
// prints in --help.
func TestTheConfigurationPageListsEveryCommandsFlags(t *testing.T) {
	helps := map[string]string{}
	for _, name := range commandNames(t) {
		args, ok := helpArgs[name]
		if !ok {
			args = []string{name}
		}
		helps[name] = cliHelp(t, args...)
	}
	require.Empty(t, cliMismatches(section(t, configurationDoc(t), "atmost"), helps, cliHelp(t)))
}

// The comparisons can fail: a flag left out, one too many, a wrong variable, a wrong default,
// and a command or variable the page does not know are each noticed.
func TestTheConfigurationChecksNoticeDifferences(t *testing.T) {
	help := parseHelp("Usage: x\n\nFlags:\n  -batch int\n    \tper fetch (env ATMOST_X_BATCH) (default 100)\n" +
		"  -lease duration\n    \tlease\n    \ttaken (env ATMOST_X_LEASE) (default 1m0s)\n  -dedupe\n    \tanswer (env ATMOST_X_DEDUPE; false when unset)\n")
	require.Equal(t, map[string]helpFlag{
		"batch":  {env: "ATMOST_X_BATCH", def: "100", printed: true},
		"lease":  {env: "ATMOST_X_LEASE", def: "1m0s", printed: true},
		"dedupe": {env: "ATMOST_X_DEDUPE"},
	}, help)
	page := func(rows ...string) func(string) string {
		return func(string) string {
			return "## x\n\n| flag | environment | default | what |\n|---|---|---|---|\n" + strings.Join(rows, "\n") + "\n"
		}
	}
	batch := "| `--batch` | `ATMOST_X_BATCH` | `100` | |"
	lease := "| `--lease` | `ATMOST_X_LEASE` | `60s` | |"
	dedupe := "| `--dedupe` | `ATMOST_X_DEDUPE` | `false` | |"
	require.Empty(t, roleMismatches("x", []string{"x"}, help, page(batch, lease, dedupe)))
	require.Len(t, roleMismatches("x", []string{"x"}, help, page(batch, lease)), 1, "a flag left out")
	require.Len(t, roleMismatches("x", []string{"x"}, help, page(batch, lease, dedupe, "| `--extra` | | `1` | |")), 1, "a flag too many")
	require.Len(t, roleMismatches("x", []string{"x"}, help, page(batch, "| `--lease` | `ATMOST_X_LEAS` | `60s` | |", dedupe)), 1, "a wrong variable")
	require.Len(t, roleMismatches("x", []string{"x"}, help, page("| `--batch` | `ATMOST_X_BATCH` | `128` | |", lease, dedupe)), 1, "a wrong default")
	require.Len(t, roleMismatches("x", []string{"x"}, help, page("| `--batch` | `ATMOST_X_BATCH` | none | |", lease, dedupe)), 1, "prose for a printed default")

	cmdHelp := "Usage:\n\nFlags:\n  -database-url string\n    \tthe ledger (env ATMOST_DATABASE_URL) (default \"x\")\n  -json\n    \tprint JSON\n"
	top := "Environment:\n  ATMOST_DATABASE_URL  the ledger\n"
	good := "| variable | what |\n|---|---|\n| `ATMOST_DATABASE_URL` | |\n\n" +
		"| command | flags |\n|---|---|\n| `ls` | `--database-url`, `--json` |\n\n" +
		"| flag | environment | what |\n|---|---|---|\n| `--database-url` | `ATMOST_DATABASE_URL` | |\n| `--json` | | |\n"
	require.Empty(t, cliMismatches(good, map[string]string{"ls": cmdHelp}, top))
	require.Len(t, cliMismatches(strings.Replace(good, ", `--json` |", " |", 1), map[string]string{"ls": cmdHelp}, top), 1, "a flag left out of the command table")
	require.Len(t, cliMismatches(strings.Replace(good, "| `--json` | | |\n", "", 1), map[string]string{"ls": cmdHelp}, top), 1, "a flag without a meaning")
	require.Len(t, cliMismatches(good, map[string]string{"ls": cmdHelp, "rm": cmdHelp}, top), 2, "a command the table lacks")
	require.Len(t, cliMismatches(good, map[string]string{"ls": cmdHelp}, top+"  ATMOST_OPERATOR  who\n"), 1, "a variable the page lacks")
}
