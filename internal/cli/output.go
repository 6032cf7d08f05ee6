package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/atmost/atmost/pkg/ledger"
)

// Exit codes of Run (exitCodes says what each means).
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// exitCodes is the one table of what atmost's exit codes mean, printed by atmost --help and
// repeated in docs/configuration.md#atmost (a test keeps them identical).
var exitCodes = []struct {
	code    int
	meaning string
}{
	{ExitOK, "done"},
	{ExitError, "refused or failed: the command did not do what it asked for; the message says why, and whether anything changed"},
	{ExitUsage, "usage: an unknown command or flag, a missing argument or required flag, or a value out of range; nothing was done"},
}

// errorJSON is an error as a command run with --json writes it on standard error: one JSON
// object on one line. Help names the command whose --help lists the flags, for a usage error.
type errorJSON struct {
	Error   string `json:"error"`
	Code    int    `json:"code"`
	Command string `json:"command"`
	Help    string `json:"help,omitempty"`
}

// noteJSON is a warning or a note a command run with --json writes on standard error.
type noteJSON struct {
	Note    string `json:"note"`
	Command string `json:"command"`
}

// problem reports that the command ends with code (ExitError or ExitUsage) and why, as text or,
// with --json, as one JSON object, and returns code.
func (c *line) problem(code int, msg string) int {
	if c.jsonErrors {
		e := errorJSON{Error: msg, Code: code, Command: c.name}
		if code == ExitUsage {
			e.Help = c.name + " --help"
		}
		c.stderrJSON(e)
		return code
	}
	fmt.Fprintf(c.io.Stderr, "%s: %s\n", c.name, msg)
	if code == ExitUsage {
		fmt.Fprintf(c.io.Stderr, "(%s --help lists the flags)\n", c.name)
	}
	return code
}

// note writes a line about the command on standard error that does not end it: a warning, or
// what was done besides its output.
func (c *line) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if c.jsonErrors {
		c.stderrJSON(noteJSON{Note: msg, Command: c.name})
		return
	}
	fmt.Fprintf(c.io.Stderr, "%s: %s\n", c.name, msg)
}

func (c *line) stderrJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"error": %q, "code": %d}`, err.Error(), ExitError))
	}
	fmt.Fprintf(c.io.Stderr, "%s\n", b)
}

// usageError reports a bad command line, naming the fix, and returns ExitUsage.
func (c *line) usageError(format string, args ...any) int {
	return c.problem(ExitUsage, fmt.Sprintf(format, args...))
}

// refused reports a change the ledger refused, and returns ExitError.
func (c *line) refused(format string, args ...any) int {
	return c.problem(ExitError, "refused: "+fmt.Sprintf(format, args...))
}

// fail reports a command that could not be done and returns ExitError.
func (c *line) fail(err error) int {
	hint := ""
	switch {
	case errors.Is(err, ledger.ErrUnknownAccount):
		hint = " (atmost accounts ls lists the configured accounts)"
	case errors.Is(err, ledger.ErrControlRaced):
		hint = "; nothing was changed: look again and repeat the change if it still stands"
	}
	return c.problem(ExitError, err.Error()+hint)
}

// writeJSON writes v on standard output as indented JSON.
func writeJSON(io IO, v any) int {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(io.Stderr, "atmost: write JSON: %v\n", err)
		return ExitError
	}
	fmt.Fprintf(io.Stdout, "%s\n", b)
	return ExitOK
}
