package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os/user"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/atmost/atmost/pkg/ledger"
)

// controlLine is the parsed command line of one operator-control command,
// `atmost GROUP SUB [flags]`.
type controlLine struct {
	io          IO
	name        string // "atmost switch on"
	fs          *flag.FlagSet
	databaseURL *string
	asJSON      *bool
	operator    *string
	reason      *string
}

// parseControl parses `atmost group sub [flags]`. subs maps every subcommand of the group to the
// flags it takes besides --database-url and --json; define adds the group's own flags. A flag of
// the group that the subcommand does not take is a usage error, so that `policy get
// --attempt-cap 5` never looks as if it had set something. done is true when the command is
// over (help, or a bad command line) and code is its exit code.
func parseControl(io IO, group, usage string, args []string, subs map[string][]string, define func(fs *flag.FlagSet)) (c controlLine, sub string, code int, done bool) {
	c, sub, _, code, done = parseGroup(io, group, usage, args, subs, nil, define)
	return c, sub, code, done
}

// parseGroup is parseControl for groups whose subcommands also take positional arguments:
// positional maps a subcommand to the names of the arguments it requires (`intents show KEY`),
// returned in pos.
func parseGroup(io IO, group, usage string, args []string, subs, positional map[string][]string, define func(fs *flag.FlagSet)) (c controlLine, sub string, pos []string, code int, done bool) {
	c = newLine(io, "atmost "+group, usage, define)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		c.fs.Usage()
		if len(args) == 0 {
			return c, "", nil, ExitUsage, true
		}
		return c, "", nil, ExitOK, true
	}
	sub, args = args[0], args[1:]
	allowed, ok := subs[sub]
	if !ok {
		fmt.Fprintf(io.Stderr, "atmost %s: unknown command %q\n\n%s", group, sub, usage)
		return c, sub, nil, ExitUsage, true
	}
	c.name = "atmost " + group + " " + sub
	c.fs.Init(c.name, flag.ContinueOnError)
	pos, code, done = c.parse(args, allowed, positional[sub])
	return c, sub, pos, code, done
}

// parseCommand parses `atmost name ARG... [flags]`, a command without subcommands: allowed and
// positional mean what they mean for parseGroup. Without any argument it prints its usage.
func parseCommand(io IO, name, usage string, args []string, allowed, positional []string, define func(fs *flag.FlagSet)) (c controlLine, pos []string, code int, done bool) {
	c = newLine(io, "atmost "+name, usage, define)
	if len(args) == 0 || (len(args) == 1 && args[0] == "help") {
		c.fs.Usage()
		if len(args) == 0 {
			return c, nil, ExitUsage, true
		}
		return c, nil, ExitOK, true
	}
	pos, code, done = c.parse(args, allowed, positional)
	return c, pos, code, done
}

// newLine is a command line with the flags every command takes; define adds the command's own.
func newLine(io IO, name, usage string, define func(fs *flag.FlagSet)) controlLine {
	c := controlLine{io: io, name: name}
	c.fs = flag.NewFlagSet(name, flag.ContinueOnError)
	c.fs.SetOutput(io.Stderr)
	c.fs.Usage = func() { fmt.Fprint(io.Stderr, usage, "\nFlags:\n"); c.fs.PrintDefaults() }
	c.databaseURL = c.fs.String("database-url", setting(io.Env, "ATMOST_DATABASE_URL", DefaultDatabaseURL), "the ledger database (env ATMOST_DATABASE_URL)")
	c.asJSON = c.fs.Bool("json", false, "print JSON instead of a table")
	c.operator = c.fs.String("operator", "", "changes: who makes the change, written to the history (default $ATMOST_OPERATOR, else user:<OS user name>)")
	c.reason = c.fs.String("reason", "", "changes: why, written to the history (required)")
	define(c.fs)
	return c
}

// parse parses the flags and the positional arguments of a command line. The arguments named
// by positional are required and may come before, between or after the flags; any other
// argument is a usage error, and so is a flag the command does not take (allowed names those
// it takes besides --database-url and --json).
func (c *controlLine) parse(args, allowed, positional []string) (pos []string, code int, done bool) {
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, ExitOK, true
			}
			return nil, ExitUsage, true
		}
		if c.fs.NArg() == 0 || len(positional) == 0 {
			break
		}
		if len(pos) == len(positional) {
			return nil, c.usageError("unexpected argument %q after %s", c.fs.Arg(0), strings.Join(positional, " ")), true
		}
		pos = append(pos, c.fs.Arg(0))
		args = c.fs.Args()[1:]
	}
	if c.fs.NArg() > 0 {
		return nil, c.usageError("unexpected argument %q (flags come as --name value)", c.fs.Arg(0)), true
	}
	if len(pos) < len(positional) {
		return nil, c.usageError("give the %s", strings.Join(positional[len(pos):], " and the ")), true
	}
	var stray []string
	c.fs.Visit(func(f *flag.Flag) {
		if f.Name != "database-url" && f.Name != "json" && !slices.Contains(allowed, f.Name) {
			stray = append(stray, "--"+f.Name)
		}
	})
	if len(stray) > 0 {
		sub := c.name[strings.LastIndex(c.name, " ")+1:]
		return nil, c.usageError("%s: not a flag of %s", strings.Join(stray, ", "), sub), true
	}
	return pos, ExitOK, false
}

// given reports whether the command line set the flag.
func (c controlLine) given(name string) bool {
	set := false
	c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// account returns the --account flag's value, refusing one given but empty: a script whose
// account variable is empty must not change the global switch or the default policy.
func (c controlLine) account(value string) (string, int) {
	if c.given("account") && strings.TrimSpace(value) == "" {
		return "", c.usageError("--account is empty: name the account, or leave the flag out for the global scope")
	}
	return value, ExitOK
}

// usageError reports a bad command line, naming the fix, and returns ExitUsage.
func (c controlLine) usageError(format string, args ...any) int {
	fmt.Fprintf(c.io.Stderr, "%s: %s\n(%s --help lists the flags)\n", c.name, fmt.Sprintf(format, args...), c.name)
	return ExitUsage
}

// fail reports a command that could not be done and returns ExitError.
func (c controlLine) fail(err error) int {
	hint := ""
	switch {
	case errors.Is(err, ledger.ErrUnknownAccount):
		hint = " (atmost accounts ls lists the configured accounts)"
	case errors.Is(err, ledger.ErrControlRaced):
		hint = "; nothing was changed: look again and repeat the change if it still stands"
	}
	fmt.Fprintf(c.io.Stderr, "%s: %v%s\n", c.name, err, hint)
	return ExitError
}

// change returns the operator and the reason of a change, or the exit code of a usage error
// when either is missing.
func (c controlLine) change() (operator, reason string, code int) {
	reason = strings.TrimSpace(*c.reason)
	if reason == "" {
		return "", "", c.usageError("--reason is required: say why, for the control history")
	}
	operator, err := operatorName(c.io, *c.operator)
	if err != nil {
		return "", "", c.usageError("%v", err)
	}
	return operator, reason, ExitOK
}

// operatorName is who makes a change: the --operator flag, else ATMOST_OPERATOR, else the OS
// user as user:NAME. None of them is an error: a change without an author is refused.
func operatorName(io IO, flagValue string) (string, error) {
	if name := strings.TrimSpace(flagValue); name != "" {
		return name, nil
	}
	if name := strings.TrimSpace(setting(io.Env, "ATMOST_OPERATOR", "")); name != "" {
		return name, nil
	}
	lookup := io.User
	if lookup == nil {
		lookup = func() (string, error) {
			u, err := user.Current()
			if err != nil {
				return "", err
			}
			return u.Username, nil
		}
	}
	name, err := lookup()
	if err == nil && strings.TrimSpace(name) != "" {
		return "user:" + strings.TrimSpace(name), nil
	}
	if err == nil {
		err = errors.New("it has no name")
	}
	return "", fmt.Errorf("no operator to record: name yourself with --operator NAME or ATMOST_OPERATOR (the OS user could not be found: %v)", err)
}

// scopeName shows a control's scope: its account, or what the empty scope means for its kind.
func scopeName(kind, scope string) string {
	switch {
	case scope != "":
		return scope
	case kind == "switch":
		return "global"
	case kind == "policy":
		return "default"
	}
	return "-"
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

const controlsUsage = `Usage:
  atmost controls log [--kind switch|policy|epoch|account] [--limit N] [--json]

Every change an operator made to a kill switch, a policy, the restore epoch or an account,
newest first: who, when, why, and the settings before and after. The log is append-only.
`

func runControls(ctx context.Context, io IO, args []string) int {
	var kind *string
	var limit *int
	c, _, code, done := parseControl(io, "controls", controlsUsage, args, map[string][]string{"log": {"kind", "limit"}}, func(fs *flag.FlagSet) {
		kind = fs.String("kind", "", "log: only changes of this kind ("+strings.Join(ledger.ControlKinds, ", ")+")")
		limit = fs.Int("limit", 20, "log: at most this many changes")
	})
	if done {
		return code
	}
	if *kind != "" && !slices.Contains(ledger.ControlKinds, *kind) {
		return c.usageError("--kind %q: give one of %s", *kind, strings.Join(ledger.ControlKinds, ", "))
	}
	if *limit < 1 {
		return c.usageError("--limit %d: give at least 1", *limit)
	}
	l, closeLedger, err := openLedger(ctx, *c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	changes, err := l.ControlHistory(ctx, *kind, *limit)
	if err != nil {
		return c.fail(err)
	}
	if *c.asJSON {
		if changes == nil {
			changes = []ledger.ControlChange{}
		}
		return writeJSON(io, changes)
	}
	w := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tKIND\tSCOPE\tOPERATOR\tCHANGE\tREASON")
	for _, ch := range changes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", timestamp(ch.At), ch.Kind, scopeName(ch.Kind, ch.Scope), ch.Actor, describeChange(ch.Kind, ch.Before, ch.After), ch.Reason)
	}
	_ = w.Flush()
	return ExitOK
}

// describeChange says in one line what a change of the control history changed: a switch
// "off -> on", the epoch "1 -> 2", a policy "key: before -> after" for each field that changed.
func describeChange(kind string, before, after json.RawMessage) string {
	switch kind {
	case "switch":
		var b, a struct{ Engaged *bool }
		_ = json.Unmarshal(before, &b)
		_ = json.Unmarshal(after, &a)
		return onOff(b.Engaged) + " -> " + onOff(a.Engaged)
	case "epoch":
		var b, a struct{ Epoch *int64 }
		_ = json.Unmarshal(before, &b)
		_ = json.Unmarshal(after, &a)
		if b.Epoch == nil || a.Epoch == nil {
			break
		}
		return fmt.Sprintf("%d -> %d", *b.Epoch, *a.Epoch)
	case "account":
		if string(compact(before)) == "null" {
			var a map[string]json.RawMessage
			_ = json.Unmarshal(after, &a)
			var parts []string
			for _, k := range sortedKeys(a) {
				parts = append(parts, k+": "+string(compact(a[k])))
			}
			return "added: " + strings.Join(parts, ", ")
		}
	}
	return describeFields(before, after)
}

// onOff shows a switch's state; nil is a switch never set, which is off.
func onOff(engaged *bool) string {
	switch {
	case engaged == nil:
		return "off (never set)"
	case *engaged:
		return "on"
	}
	return "off"
}

// describeFields lists "key: before -> after" for each key of two settings objects whose
// values differ; a missing before (a row the change created) reads as every key inherited.
func describeFields(before, after json.RawMessage) string {
	var b, a map[string]json.RawMessage
	_ = json.Unmarshal(before, &b)
	_ = json.Unmarshal(after, &a)
	var parts []string
	for _, k := range sortedKeys(a) {
		if !bytes.Equal(compact(b[k]), compact(a[k])) {
			parts = append(parts, k+": "+jsonValue(b[k])+" -> "+jsonValue(a[k]))
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func compact(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

// jsonValue shows one JSON value for a table: null (an inherited policy field) as "inherit",
// a string unquoted, a list comma-separated.
func jsonValue(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v == nil {
		return "inherit"
	}
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = fmt.Sprint(x)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return string(compact(raw))
}
