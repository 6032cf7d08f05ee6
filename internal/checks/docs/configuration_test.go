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
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/tools/platformsim"
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
	flagLine     = regexp.MustCompile(`^  --([a-z][a-z0-9-]*)`)
	flagEnv      = regexp.MustCompile(`(?:\(env |\$)(ATMOST_[A-Z0-9_]+)`)
	flagDefault  = regexp.MustCompile(`\(default (.*)\)$`)
	envVariable  = regexp.MustCompile(`\bATMOST_[A-Z0-9_]+\b`)
	envSection   = regexp.MustCompile(`(?m)^  (ATMOST_[A-Z0-9_]+) `)
	backtickFlag = regexp.MustCompile("`--([a-z][a-z0-9-]*)`")
	backtickEnv  = regexp.MustCompile("`(ATMOST_[A-Z0-9_]+)`")
)

// parseHelp reads the flags of a --help: "  --name type" (flaghelp.PrintDefaults, the roles) or
// "  --name VALUE" (atmost), each followed by its usage on lines that start with a tab. A flag
// spelled -name is not read, so a --help that spells one so lists fewer flags than the page.
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

// cliCommand is one command of atmost that runs, as its --help shows it.
type cliCommand struct {
	path  string   // "switch on"
	usage []string // its own usage lines, each on one line
	help  string
}

var (
	usageSection = regexp.MustCompile(`(?s)^Usage:\n(.*?)\n\n`)
	commandList  = regexp.MustCompile(`(?s)\nCommands:\n(.*?)(?:\n\n|$)`)
	exitCodeLine = regexp.MustCompile(`(?m)^  ([0-9]+)  (.+)$`)
)

// listedCommands are the names a help's Commands: section lists.
func listedCommands(help string) []string {
	m := commandList.FindStringSubmatch(help)
	if m == nil {
		return nil
	}
	var names []string
	for _, line := range strings.Split(m[1], "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names
}

// usageLines are the lines of a help's Usage: section, a wrapped line joined into one.
func usageLines(help string) []string {
	m := usageSection.FindStringSubmatch(help)
	if m == nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(m[1], "\n") {
		switch {
		case strings.HasPrefix(line, "        ") && len(out) > 0:
			out[len(out)-1] += " " + strings.TrimSpace(line)
		case strings.TrimSpace(line) != "":
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// cliCommands walks atmost from its --help: every command a Commands: section lists, and in it
// every subcommand, in the order --help lists them. A group that also runs itself (migrate) is
// one of them, with its own usage lines only.
func cliCommands(t *testing.T) []cliCommand {
	t.Helper()
	var out []cliCommand
	var walk func(path []string)
	walk = func(path []string) {
		help := cliHelp(t, path...)
		subs := listedCommands(help)
		name := strings.Join(path, " ")
		var own []string
	lines:
		for _, u := range usageLines(help) {
			for _, s := range subs {
				if u == "atmost "+name+" "+s || strings.HasPrefix(u, "atmost "+name+" "+s+" ") {
					continue lines
				}
			}
			own = append(own, u)
		}
		if len(own) > 0 {
			out = append(out, cliCommand{path: name, usage: own, help: help})
		}
		for _, s := range subs {
			walk(append(append([]string{}, path...), s))
		}
	}
	top := listedCommands(cliHelp(t))
	require.NotEmpty(t, top, "atmost --help lists no commands")
	for _, name := range top {
		walk([]string{name})
	}
	return out
}

// fencedLines are the lines of the fenced code blocks of md that start with "atmost ".
func fencedLines(md string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in
		case in && strings.HasPrefix(line, "atmost "):
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// cliMismatches compares the atmost section of the configuration page with what every command
// prints: the usage block lists each command's usage lines as --help prints them, in the same
// order; the meaning table lists every flag once; the exit-code table is atmost --help's; the
// variables named anywhere in the section are those --help names.
func cliMismatches(doc string, cmds []cliCommand, topHelp string) []string {
	var out []string
	meanings := map[string]int{}
	documentedEnv := map[string]bool{}
	documentedCodes := map[string]string{}
	variables := map[string]bool{} // the page's table of the command's variables
	for _, row := range tables(doc) {
		for _, m := range backtickEnv.FindAllStringSubmatch(row["variable"], -1) {
			variables[m[1]] = true
		}
		switch {
		case row["flag"] != "":
			for _, m := range backtickFlag.FindAllStringSubmatch(row["flag"], -1) {
				meanings[m[1]]++
			}
		case row["code"] != "":
			documentedCodes[strings.Trim(row["code"], "`")] = row["meaning"]
		}
		for _, col := range []string{"variable", "environment"} {
			for _, m := range backtickEnv.FindAllStringSubmatch(row[col], -1) {
				documentedEnv[m[1]] = true
			}
		}
	}

	var printed []string
	for _, c := range cmds {
		printed = append(printed, c.usage...)
	}
	listed := fencedLines(doc)
	inDoc, inHelp := map[string]bool{}, map[string]bool{}
	for _, l := range listed {
		inDoc[l] = true
	}
	for _, l := range printed {
		inHelp[l] = true
		if !inDoc[l] {
			out = append(out, fmt.Sprintf("--help prints the usage %q, which the page does not list", l))
		}
	}
	for _, l := range listed {
		if !inHelp[l] {
			out = append(out, fmt.Sprintf("the page lists the usage %q, which no --help prints", l))
		}
	}
	if len(out) == 0 && strings.Join(listed, "\n") != strings.Join(printed, "\n") {
		out = append(out, "the page lists the usage lines in another order than --help: "+strings.Join(printed, " / "))
	}

	helpCodes := map[string]string{}
	for _, m := range exitCodeLine.FindAllStringSubmatch(topHelp[strings.Index(topHelp, "Exit codes:")+1:], -1) {
		helpCodes[m[1]] = m[2]
	}
	if len(helpCodes) == 0 {
		out = append(out, "atmost --help lists no exit codes")
	}
	for code, meaning := range helpCodes {
		if documentedCodes[code] != meaning {
			out = append(out, fmt.Sprintf("exit code %s means %q in --help, %q on the page", code, meaning, documentedCodes[code]))
		}
	}
	for code := range documentedCodes {
		if _, ok := helpCodes[code]; !ok {
			out = append(out, "the page lists exit code "+code+", which atmost --help does not")
		}
	}

	helpEnv := map[string]bool{}
	for _, m := range envSection.FindAllStringSubmatch(topHelp, -1) {
		helpEnv[m[1]] = true
	}
	// atmost --help is where a reader looks for them: every variable, not the common ones.
	for v := range variables {
		if !helpEnv[v] {
			out = append(out, "the page lists the variable "+v+", which atmost --help's Environment does not")
		}
	}
	all := map[string]bool{}
	for _, c := range cmds {
		flags := parseHelp(c.help)
		for f, h := range flags {
			all[f] = true
			if h.env != "" {
				helpEnv[h.env] = true
			}
		}
		for _, v := range envVariable.FindAllString(c.help, -1) {
			if strings.Contains(c.help, "(env "+v) || strings.Contains(c.help, "$"+v) {
				helpEnv[v] = true
			}
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

// The atmost section lists exactly the commands, usage lines, flags, exit codes and variables
// the operator command prints in --help.
func TestTheConfigurationPageListsEveryCommandsFlags(t *testing.T) {
	cmds := cliCommands(t)
	require.Greater(t, len(cmds), 20, "every command and subcommand")
	require.Empty(t, cliMismatches(section(t, configurationDoc(t), "atmost"), cmds, cliHelp(t)))
}

// The comparisons can fail: a flag left out, one too many, a wrong variable, a wrong default,
// and a command or variable the page does not know are each noticed.
func TestTheConfigurationChecksNoticeDifferences(t *testing.T) {
	help := parseHelp("Usage: x\n\nFlags:\n  --batch int\n    \tper fetch (env ATMOST_X_BATCH) (default 100)\n" +
		"  --lease duration\n    \tlease\n    \ttaken (env ATMOST_X_LEASE) (default 1m0s)\n  --dedupe\n    \tanswer (env ATMOST_X_DEDUPE; false when unset)\n  -single\n    \tspelled the flag package's way\n")
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

	cmdHelp := "Usage:\n  atmost x ls [--database-url URL]\n        [--json]\n\nFlags:\n  --database-url URL\n    \tthe ledger (env ATMOST_DATABASE_URL) (default x)\n  --json\n    \tprint JSON\n"
	cmds := []cliCommand{{path: "x ls", usage: usageLines(cmdHelp), help: cmdHelp}}
	require.Equal(t, []string{"atmost x ls [--database-url URL] [--json]"}, cmds[0].usage)
	top := "Environment:\n  ATMOST_DATABASE_URL  the ledger\n\nExit codes:\n  0  done\n  2  usage\n"
	good := "| variable | what |\n|---|---|\n| `ATMOST_DATABASE_URL` | |\n\n" +
		"```text\natmost x ls [--database-url URL] [--json]\n```\n\n" +
		"| code | meaning |\n|---|---|\n| `0` | done |\n| `2` | usage |\n\n" +
		"| flag | environment | what |\n|---|---|---|\n| `--database-url` | `ATMOST_DATABASE_URL` | |\n| `--json` | | |\n"
	require.Empty(t, cliMismatches(good, cmds, top))
	require.Len(t, cliMismatches(strings.Replace(good, " [--json]\n```", "\n```", 1), cmds, top), 2, "a flag left out of a usage line")
	require.Len(t, cliMismatches(strings.Replace(good, "| `--json` | | |\n", "", 1), cmds, top), 1, "a flag without a meaning")
	rm := cliCommand{path: "x rm", usage: []string{"atmost x rm KEY"}, help: cmdHelp}
	require.Len(t, cliMismatches(good, append(cmds, rm), top), 1, "a command the page lacks")
	require.Len(t, cliMismatches(strings.Replace(good, "```\n\n", "atmost x rm KEY\n```\n\n", 1), append([]cliCommand{rm}, cmds...), top), 1, "another order")
	require.Len(t, cliMismatches(good, cmds, top+"  ATMOST_OPERATOR  who\n"), 1, "a variable the page lacks")
	require.Len(t, cliMismatches(good, cmds, strings.Replace(top, "  ATMOST_DATABASE_URL  the ledger\n", "", 1)), 1,
		"a variable a command's --help names and atmost --help does not list")
	require.Len(t, cliMismatches(strings.Replace(good, "| `2` | usage |", "| `2` | usage error |", 1), cmds, top), 1, "an exit code that means something else")
	require.Len(t, cliMismatches(good, cmds, strings.Replace(top, "  2  usage\n", "", 1)), 1, "an exit code --help does not list")
}
