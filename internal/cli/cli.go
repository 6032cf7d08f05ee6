// Package cli is the atmost operator command: it parses the command line and runs one command.
// cmd/atmost only wires the process (signals, exit code) to Run.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// DefaultDatabaseURL is the ledger used when ATMOST_DATABASE_URL is unset: the local
// PostgreSQL server's "atmost" database.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/atmost?sslmode=disable"

// Exit codes of Run.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Env looks up an environment variable; os.LookupEnv in production, a map in tests.
type Env func(name string) (string, bool)

// IO is where a command reads its environment and writes its output.
type IO struct {
	Stdout io.Writer
	Stderr io.Writer
	Env    Env
	// User returns the name of the user running the command, the last resort for naming the
	// operator of a change. Nil means the OS user (os/user).
	User func() (string, error)
}

// OS is the process's own standard output, standard error and environment.
func OS() IO { return IO{Stdout: os.Stdout, Stderr: os.Stderr, Env: os.LookupEnv} }

type command struct {
	summary string
	run     func(ctx context.Context, io IO, args []string) int
}

var commands = map[string]command{
	"accounts": {"accounts add, ls, show, update, disable, enable, rotate, revoke: checked by their adapter, every change in the control history", runAccounts},
	"controls": {"controls log: every operator change to switches, policies, the epoch and accounts, newest first", runControls},
	"epoch":    {"epoch show, epoch bump: the restore epoch (bump it after a restore, before any worker starts)", runEpoch},
	"events":   {"events tail: the transitions on ATMOST_EVENTS, the last few or from a time, --follow for new ones", runEvents},
	"intents":  {"intents ls, intents show KEY: a page of intents; one with its attempts, evidence, history, reconciliations", runIntents},
	"migrate":  {"apply the ledger schema to ATMOST_DATABASE_URL (migrate status: show it)", runMigrate},
	"park":     {"park KEY --reason R: stop an intent; a human owns it from then on", runPark},
	"policy":   {"policy get, policy set: attempt caps, backoff, rate limits, retryable reasons", runPolicy},
	"rejects":  {"rejects ls: refused input, newest first, with its reason", runRejects},
	"resolve":  {"resolve KEY --published --object-id ID | --failed, --evidence E: a human's verdict on a parked intent", runResolve},
	"retry":    {"retry KEY --reason R: reopen a failed intent (only failed: nothing was sent)", runRetry},
	"switch":   {"switch ls, switch on, switch off: the global and per-account kill switches", runSwitch},
	"version":  {"print the version of this binary and the schema version it expects", runVersion},
}

// Run runs the command named by args[0] with the rest of args and returns the process exit
// code: ExitOK, ExitError when the command failed, ExitUsage for a bad command line.
func Run(ctx context.Context, io IO, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(io.Stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...) // as every binary of atmost answers it
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(io.Stderr, "atmost: unknown command %q\n\n", args[0])
		usage(io.Stderr)
		return ExitUsage
	}
	return cmd.run(ctx, io, args[1:])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "atmost delivers irreversible side effects at most once.")
	fmt.Fprintln(w, "\nUsage: atmost <command> [flags]   (atmost <command> --help for its flags)\n\nCommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nEnvironment:\n  ATMOST_DATABASE_URL  the ledger (default "+DefaultDatabaseURL+")")
	fmt.Fprintln(w, "  ATMOST_OPERATOR      who makes changes to controls and intents (default user:<OS user name>)")
	fmt.Fprintln(w, "  ATMOST_NATS_URL      events tail reads it (default "+DefaultNATSURL+"); park, resolve and retry publish")
	fmt.Fprintln(w, "                       their event on it right away when it is set (else the next relay round does)")
}

// setting returns the environment variable's value, or def when it is unset or blank.
func setting(env Env, name, def string) string {
	if v, ok := env(name); ok && strings.TrimSpace(v) != "" {
		return v
	}
	return def
}
