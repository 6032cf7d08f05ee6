package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// DeclaredCommand is one command of the declaration (rootCommand), for the tests that walk
// every command line.
type DeclaredCommand struct {
	Path  []string // without "atmost"
	Args  []string
	Flags []DeclaredFlag
	Subs  []string
	Runs  bool // it runs (a subcommand, or a group that runs itself)
	Usage []string
}

// DeclaredFlag is one flag of a DeclaredCommand: Kind is the type of its value (string, int,
// int64, bool, time.Duration).
type DeclaredFlag struct {
	Name     string
	Kind     string
	Required bool
}

// DeclaredCommands walks rootCommand: every command and subcommand, a group before its
// subcommands.
func DeclaredCommands() []DeclaredCommand {
	var out []DeclaredCommand
	var walk func(cmd, parent *Command, path []string)
	walk = func(cmd, parent *Command, path []string) {
		d := DeclaredCommand{Path: path, Args: cmd.Args, Runs: cmd.Run != nil}
		for _, s := range cmd.Subs {
			d.Subs = append(d.Subs, s.Name)
		}
		c := newLine(IO{Env: func(string) (string, bool) { return "", false }}, "atmost "+strings.Join(path, " "), cmd, parent)
		for _, g := range c.flags.list {
			d.Flags = append(d.Flags, DeclaredFlag{Name: g.name, Kind: kind(c.fs.Lookup(g.name)), Required: g.required != ""})
		}
		if d.Runs {
			d.Usage = c.synopsis()
		}
		out = append(out, d)
		for _, s := range cmd.Subs {
			walk(s, cmd, append(append([]string{}, path...), s.Name))
		}
	}
	root := rootCommand()
	for _, s := range root.Subs {
		walk(s, root, []string{s.Name})
	}
	return out
}

func kind(f *flag.Flag) string {
	switch v := f.Value.(flag.Getter).Get().(type) {
	case time.Duration:
		return "time.Duration"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// dataKeys are the JSON keys whose values are data, not atmost's own names (a request, the
// adapter's settings, message headers, maps keyed by account or verdict): NonSnakeKeys does not
// look inside them.
var dataKeys = map[string]bool{"request": true, "detail": true, "settings": true, "headers": true, "overrides": true, "totals": true}

var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// NonSnakeKeys lists the keys of the JSON documents in out (one or several, one after another)
// that are not snake_case, with their path.
func NonSnakeKeys(out []byte) ([]string, error) {
	var bad []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snakeKey.MatchString(k) {
					bad = append(bad, path+"."+k)
				}
				if !dataKeys[k] {
					walk(path+"."+k, x)
				}
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			return bad, err
		}
		walk("", v)
	}
	return bad, nil
}

// SetReplayPaging makes rejects replay read pages of page rejects and note its progress after
// every page at most every progress, until the test ends. A test that calls it must not run in
// parallel.
func SetReplayPaging(t interface{ Cleanup(func()) }, page int, progress time.Duration) {
	saved := replayPaging
	replayPaging.page, replayPaging.progress = page, progress
	t.Cleanup(func() { replayPaging = saved })
}
