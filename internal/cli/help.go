package cli

import (
	"fmt"
	stdio "io"
	"strings"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/internal/dev"
)

// helpWidth is where a generated usage line wraps.
const helpWidth = 100

// envColumn is where atmost --help's descriptions of the variables start, past the longest name.
const envColumn = 28

// help writes the command's --help: its usage lines, its text, its subcommands and its flags,
// every flag as --name.
func (c *line) help(w stdio.Writer) {
	cmd := c.cmd
	if c.group == nil {
		rootHelp(w, cmd)
		return
	}
	fmt.Fprintln(w, "Usage:")
	for _, l := range c.usageLines() {
		fmt.Fprintf(w, "  %s\n", l)
	}
	about := cmd.About
	if about == "" && len(cmd.Subs) == 0 {
		about = c.group.About
	}
	if about = strings.TrimSpace(about); about != "" {
		fmt.Fprintf(w, "\n%s\n", about)
	}
	if len(cmd.Subs) > 0 {
		fmt.Fprintln(w, "\nCommands:")
		listCommands(w, cmd.Subs)
	}
	if len(c.flags.list) > 0 {
		fmt.Fprintln(w, "\nFlags:")
		c.printFlags(w)
	}
	if len(cmd.Subs) > 0 {
		fmt.Fprintf(w, "\n%s COMMAND --help lists a command's flags.\n", c.name)
	}
}

// usageLines are the command's usage lines: a group's are those of each subcommand (and its
// own when it runs itself).
func (c *line) usageLines() []string {
	var out []string
	if len(c.cmd.Subs) == 0 || c.cmd.Run != nil {
		out = append(out, c.synopsis()...)
	}
	for _, s := range c.cmd.Subs {
		out = append(out, newLine(c.io, c.name+" "+s.Name, s, c.cmd).usageLines()...)
	}
	return out
}

// synopsis is the command's own usage: Synopsis when declared, else the path, the arguments
// and every flag, the optional ones in brackets.
func (c *line) synopsis() []string {
	if c.cmd.Synopsis != nil {
		out := make([]string, len(c.cmd.Synopsis))
		for i, s := range c.cmd.Synopsis {
			out[i] = c.name + " " + s
		}
		return out
	}
	words := append([]string{c.name}, c.cmd.Args...)
	for _, g := range c.flags.list {
		words = append(words, g.token())
	}
	return wrap(words, helpWidth)
}

// token is the flag as a usage line shows it: --name VALUE, in brackets unless required.
func (g *Flag) token() string {
	t := "--" + g.name
	if g.value != "" {
		t += " " + g.value
	}
	if g.required == "" {
		t = "[" + t + "]"
	}
	return t
}

// wrap joins words into lines of at most width characters; lines after the first are indented.
func wrap(words []string, width int) []string {
	var lines []string
	cur := ""
	for _, w := range words {
		switch {
		case cur == "":
			cur = w
		case len(cur)+1+len(w) > width:
			lines = append(lines, cur)
			cur = "      " + w
		default:
			cur += " " + w
		}
	}
	return append(lines, cur)
}

// printFlags lists the flags as the flag package does, but as --name: the name and its value's
// name on one line, then what it means, its variable, whether it is required, and its default.
func (c *line) printFlags(w stdio.Writer) {
	for _, g := range c.flags.list {
		fmt.Fprintf(w, "  --%s", g.name)
		if g.value != "" {
			fmt.Fprintf(w, " %s", g.value)
		}
		usage := g.usage
		if g.env != "" {
			usage += " (env " + g.env + ")"
		}
		if g.required != "" {
			usage += " (required)"
		}
		if g.def != "" {
			usage += " (default " + g.def + ")"
		}
		fmt.Fprintf(w, "\n    \t%s\n", usage)
	}
}

func listCommands(w stdio.Writer, cmds []*Command) {
	width := 0
	for _, s := range cmds {
		width = max(width, len(s.Name))
	}
	for _, s := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, s.Name, s.Summary)
	}
}

func rootHelp(w stdio.Writer, root *Command) {
	fmt.Fprintln(w, "atmost delivers irreversible side effects at most once.")
	fmt.Fprintln(w, "\nUsage: atmost COMMAND [flags]   (atmost COMMAND --help, or atmost help COMMAND, lists its flags)")
	fmt.Fprintln(w, "\nCommands:")
	listCommands(w, root.Subs)
	fmt.Fprintln(w, "\nEnvironment:")
	for _, v := range []struct{ name, what string }{
		{"ATMOST_DATABASE_URL", "the ledger (default " + DefaultDatabaseURL + ")"},
		{"ATMOST_OPERATOR", "who makes changes to controls and intents (default user:<OS user name>)"},
		{"ATMOST_NATS_URL", "events tail and restore reconcile read it (default " + DefaultNATSURL + "); park, resolve, " +
			"retry and rejects replay publish their events on it right away when it is set (else the next relay round " +
			"does); dev uses that server instead of an embedded one; mcp publishes and asks through it"},
		{"ATMOST_DEV_DATA_DIR", "where dev's embedded NATS server keeps its streams (default: the user cache directory's atmost/dev)"},
		{"ATMOST_DEMO_DATABASE_URL", "the demo's own database, dropped and created afresh on each run (default " + dev.DemoDatabaseURL + ")"},
		{console.TokenVariable, "the token of the console that console, dev and demo serve; without it, loopback only"},
	} {
		lines := wrap(strings.Fields(v.what), helpWidth-envColumn)
		fmt.Fprintf(w, "  %-*s%s\n", envColumn-2, v.name, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "%*s%s\n", envColumn, "", strings.TrimSpace(l))
		}
	}
	fmt.Fprintln(w, "\nExit codes:")
	for _, e := range exitCodes {
		fmt.Fprintf(w, "  %d  %s\n", e.code, e.meaning)
	}
	fmt.Fprintln(w, "\nWith --json, the output is JSON with snake_case keys, and every error is one JSON object on")
	fmt.Fprintln(w, `standard error: {"error": "...", "code": N, "command": "atmost ..."}.`)
}
