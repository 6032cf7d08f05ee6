package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	stdio "io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Command declares one command of atmost: its name, the arguments and flags it takes, its help
// and what it runs. The flag set it parses, its usage lines and its --help all come from this
// one declaration, so its help cannot list a flag it refuses or leave out one it takes.
//
// A command has Subs (a group: atmost switch ls, on, off), or Run, or both (atmost migrate runs
// itself unless its first argument names a subcommand, as in migrate status). Its flags are bound
// to variables of the function that declares it, which rootCommand calls afresh for every Run:
//
//	func exampleCommand() *Command {
//		var account string
//		return &Command{Name: "example", Summary: "example ls, example rm ACCOUNT: ...", About: "...",
//			Subs: []*Command{{Name: "rm", Summary: "remove one", Args: []string{"ACCOUNT"},
//				Flags: func(f *Flags) {
//					f.String(&account, "account", "A", "", "the account").Required("name it")
//					f.Reason("why, written to the history") // c.reason, required
//					f.Operator()                            // c.operator
//					f.Ledger("the ledger database")         // c.databaseURL, env ATMOST_DATABASE_URL
//					f.JSON("print the change as JSON")      // c.asJSON; errors as JSON objects
//				},
//				Run: func(ctx context.Context, c *line) int { ... c.args[0] ... c.fail(err) ... },
//			}}}
//	}
//
// Run returns ExitOK, or what c.usageError, c.refused, c.fail or c.problem return.
type Command struct {
	// Name is the word that calls it.
	Name string
	// Summary is its line in its parent's list of commands.
	Summary string
	// Args are the positional arguments it requires, by name (KEY), in order. They may come
	// before, between or after the flags; any other argument is a usage error.
	Args []string
	// Synopsis replaces the generated usage line (the path, Args and every flag) when the
	// command has alternative forms: each line is what follows the command's path. Every flag
	// it names must be one the command takes, and it must name them all (a test checks).
	Synopsis []string
	// About is the text of its --help after the usage lines; a subcommand without one shows
	// its group's.
	About string
	// Flags declares its flags on f; nil takes none.
	Flags func(f *Flags)
	// Run runs it once the command line is parsed and checked, and returns the exit code.
	Run func(ctx context.Context, c *line) int
	// Subs are its subcommands.
	Subs []*Command
}

func (cmd *Command) sub(name string) *Command {
	for _, s := range cmd.Subs {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func (cmd *Command) subNames() string {
	names := make([]string, len(cmd.Subs))
	for i, s := range cmd.Subs {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// Flags is the flag set a Command declares, built on the standard flag package: the flag
// package parses, Flags keeps what --help prints (the value's name, the environment variable,
// whether it is required) and binds the flags every command shares to the line.
type Flags struct {
	c    *line
	fs   *flag.FlagSet
	list []*Flag
}

// Flag is one declared flag; its methods refine the declaration.
type Flag struct {
	name     string
	value    string // the value's name in the help (TEXT, N); "" for a boolean
	usage    string
	def      string // the default as --help prints it; "" prints none
	env      string // the variable whose value, when set and not blank, replaces the default
	required string // why it must be given; "" when it is optional
}

// Env makes the environment variable name the flag's default when it is set and not blank;
// the flag given on the command line wins.
func (g *Flag) Env(name string) *Flag { g.env = name; return g }

// Required makes the flag required: a command line without it, or with only white space, is a
// usage error that says why it is needed.
func (g *Flag) Required(why string) *Flag { g.required = why; return g }

// Default sets the default --help prints, for one the code computes (a machine's directory).
func (g *Flag) Default(text string) *Flag { g.def = text; return g }

func (f *Flags) add(g *Flag) *Flag {
	f.list = append(f.list, g)
	return g
}

// String declares a text flag; value names it in the help.
func (f *Flags) String(p *string, name, value, def, usage string) *Flag {
	f.fs.StringVar(p, name, def, usage)
	return f.add(&Flag{name: name, value: value, usage: usage, def: def})
}

// Int declares an integer flag; a default of 0 is not printed.
func (f *Flags) Int(p *int, name, value string, def int, usage string) *Flag {
	f.fs.IntVar(p, name, def, usage)
	return f.add(&Flag{name: name, value: value, usage: usage, def: nonZero(def != 0, strconv.Itoa(def))})
}

// Int64 declares a 64-bit integer flag; a default of 0 is not printed.
func (f *Flags) Int64(p *int64, name, value string, def int64, usage string) *Flag {
	f.fs.Int64Var(p, name, def, usage)
	return f.add(&Flag{name: name, value: value, usage: usage, def: nonZero(def != 0, strconv.FormatInt(def, 10))})
}

// Float64 declares a number flag that may have a fraction; a default of 0 is not printed.
func (f *Flags) Float64(p *float64, name, value string, def float64, usage string) *Flag {
	f.fs.Float64Var(p, name, def, usage)
	return f.add(&Flag{name: name, value: value, usage: usage, def: nonZero(def != 0, strconv.FormatFloat(def, 'g', -1, 64))})
}

// Duration declares a duration flag (a Go duration: 500ms, 5s, 10m); a default of 0 is not printed.
func (f *Flags) Duration(p *time.Duration, name, value string, def time.Duration, usage string) *Flag {
	f.fs.DurationVar(p, name, def, usage)
	return f.add(&Flag{name: name, value: value, usage: usage, def: nonZero(def != 0, def.String())})
}

// Strings declares a text flag that may be given more than once; each value is appended to p.
func (f *Flags) Strings(p *[]string, name, value, usage string) *Flag {
	f.fs.Var((*stringsValue)(p), name, usage)
	return f.add(&Flag{name: name, value: value, usage: usage + " (repeat for more)"})
}

// stringsValue is a repeated flag's values; String joins them, so a Required check sees none
// as blank.
type stringsValue []string

func (v *stringsValue) String() string {
	if v == nil {
		return ""
	}
	return strings.Join(*v, ",")
}

func (v *stringsValue) Set(s string) error { *v = append(*v, s); return nil }

func (v *stringsValue) Get() any { return []string(*v) }

// Bool declares a flag that is off unless given.
func (f *Flags) Bool(p *bool, name, usage string) *Flag {
	f.fs.BoolVar(p, name, false, usage)
	return f.add(&Flag{name: name, usage: usage})
}

func nonZero(ok bool, s string) string {
	if ok {
		return s
	}
	return ""
}

// Ledger declares --database-url, the ledger the command reads or changes (c.databaseURL).
func (f *Flags) Ledger(usage string) *Flag {
	return f.String(&f.c.databaseURL, "database-url", "URL", DefaultDatabaseURL, usage).Env("ATMOST_DATABASE_URL")
}

// JSON declares --json (c.asJSON): the output as JSON, and errors as JSON objects on stderr.
func (f *Flags) JSON(usage string) *Flag { return f.Bool(&f.c.asJSON, "json", usage) }

// Operator declares --operator (c.operator): who makes a change (operatorName).
func (f *Flags) Operator() *Flag {
	return f.String(&f.c.operator, "operator", "NAME", "", "who makes the change, written to the history (default $ATMOST_OPERATOR, else user:<OS user name>)")
}

// Reason declares --reason (c.reason), required: why a change is made.
func (f *Flags) Reason(usage string) *Flag {
	return f.String(&f.c.reason, "reason", "TEXT", "", usage).Required("say why, for the history")
}

// line is one parsed command line: the command, its positional arguments, the flags every
// command may share, and where its output and errors go.
type line struct {
	io   IO
	name string // "atmost switch on"
	cmd  *Command
	// group is the command's parent, whose About a subcommand without one shows.
	group *Command
	fs    *flag.FlagSet
	flags *Flags
	args  []string // the positional arguments, as Args names them

	databaseURL string
	asJSON      bool
	operator    string
	reason      string
	// jsonErrors is whether errors are written as JSON objects: --json as the command line
	// reads before it is parsed, then as parsed.
	jsonErrors bool
}

// newLine builds the flag set of cmd.
func newLine(io IO, name string, cmd, group *Command) *line {
	c := &line{io: io, name: name, cmd: cmd, group: group}
	c.fs = flag.NewFlagSet(name, flag.ContinueOnError)
	c.fs.SetOutput(stdio.Discard) // every message is ours (--flag, JSON)
	c.flags = &Flags{c: c, fs: c.fs}
	if cmd.Flags != nil {
		cmd.Flags(c.flags)
	}
	return c
}

// Run runs the command named by args with the rest of args and returns the process exit code
// (exitCodes).
func Run(ctx context.Context, io IO, args []string) int {
	root := rootCommand()
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		args = append([]string{"version"}, args[1:]...) // as every binary of atmost answers it
	}
	if len(args) > 0 && args[0] == "help" {
		return helpFor(io, root, args[1:])
	}
	return dispatch(ctx, io, root, nil, []string{"atmost"}, args)
}

// helpFor answers atmost help [COMMAND...]: the help of that command, as --help gives it.
func helpFor(io IO, root *Command, path []string) int {
	cmd, parent, names := root, (*Command)(nil), []string{"atmost"}
	for _, p := range path {
		sub := cmd.sub(p)
		if sub == nil {
			c := newLine(io, strings.Join(names, " "), cmd, parent)
			c.jsonErrors = wantsJSON(path)
			return c.usageError("unknown command %q: give one of %s", p, cmd.subNames())
		}
		cmd, parent, names = sub, cmd, append(names, p)
	}
	newLine(io, strings.Join(names, " "), cmd, parent).help(io.Stdout)
	return ExitOK
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// dispatch runs cmd, called by names (atmost switch), with args.
func dispatch(ctx context.Context, io IO, cmd, parent *Command, names, args []string) int {
	c := newLine(io, strings.Join(names, " "), cmd, parent)
	c.jsonErrors = wantsJSON(args)
	if len(cmd.Subs) > 0 {
		if len(args) > 0 {
			if isHelp(args[0]) {
				c.help(io.Stdout)
				return ExitOK
			}
			if sub := cmd.sub(args[0]); sub != nil {
				return dispatch(ctx, io, sub, cmd, append(names, args[0]), args[1:])
			}
		}
		if cmd.Run == nil {
			if len(args) == 0 {
				if c.jsonErrors {
					return c.usageError("give a command: %s", cmd.subNames())
				}
				c.help(io.Stderr)
				return ExitUsage
			}
			return c.usageError("unknown command %q: give one of %s", args[0], cmd.subNames())
		}
	}
	if len(args) == 0 && len(cmd.Args) > 0 {
		if c.jsonErrors {
			return c.usageError("give the %s", strings.Join(cmd.Args, " and the "))
		}
		fmt.Fprintf(io.Stderr, "%s: give the %s\n\n", c.name, strings.Join(cmd.Args, " and the "))
		c.help(io.Stderr)
		return ExitUsage
	}
	if len(args) == 1 && args[0] == "help" {
		c.help(io.Stdout)
		return ExitOK
	}
	if code, done := c.parse(args); done {
		return code
	}
	return cmd.Run(ctx, c)
}

// parse applies the environment to the flags that name a variable, parses the flags and the
// positional arguments, and checks the required flags. done is true when the command is over
// (--help, or a usage error) and code is its exit code.
func (c *line) parse(args []string) (code int, done bool) {
	for _, g := range c.flags.list {
		if g.env == "" {
			continue
		}
		if v := setting(c.io.Env, g.env, ""); v != "" {
			if err := c.fs.Lookup(g.name).Value.Set(v); err != nil {
				return c.usageError("the environment: %s=%q: %v", g.env, v, err), true
			}
		}
	}
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.help(c.io.Stdout)
				return ExitOK, true
			}
			return c.usageError("%s", c.flagError(err)), true
		}
		if c.fs.NArg() == 0 || len(c.cmd.Args) == 0 {
			break
		}
		if len(pos) == len(c.cmd.Args) {
			return c.usageError("unexpected argument %q after %s", c.fs.Arg(0), strings.Join(c.cmd.Args, " ")), true
		}
		pos = append(pos, c.fs.Arg(0))
		args = c.fs.Args()[1:]
	}
	if c.fs.NArg() > 0 {
		// The flag package stopped at the argument: the flags after it are unparsed, and
		// --json is what the line reads (wantsJSON).
		return c.usageError("unexpected argument %q (flags come as --name value)", c.fs.Arg(0)), true
	}
	c.jsonErrors = c.asJSON
	if len(pos) < len(c.cmd.Args) {
		return c.usageError("give the %s", strings.Join(c.cmd.Args[len(pos):], " and the ")), true
	}
	for _, g := range c.flags.list {
		if g.required != "" && strings.TrimSpace(c.fs.Lookup(g.name).Value.String()) == "" {
			return c.usageError("--%s is required: %s", g.name, g.required), true
		}
	}
	c.args = pos
	return ExitOK, false
}

// singleDash finds the flag package's -name in its messages.
var singleDash = regexp.MustCompile(`(^|[\s(])-([a-z])`)

// flagError says what the flag package refused, with flags spelled --name.
func (c *line) flagError(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("--%s: not a flag of %s", name, c.cmd.Name)
	}
	return singleDash.ReplaceAllString(msg, "$1--$2")
}

// wantsJSON reports whether args ask for --json, before they are parsed: a usage error is then
// written as JSON too.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "json" {
			continue
		}
		if !hasValue {
			return true
		}
		b, err := strconv.ParseBool(value)
		return err == nil && b
	}
	return false
}

// given reports whether the command line set the flag.
func (c *line) given(name string) bool {
	set := false
	c.fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
