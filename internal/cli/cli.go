// Package cli is the atmost operator command: it parses the command line and runs one command.
// cmd/atmost only wires the process (signals, exit code) to Run.
package cli

import (
	"io"
	"os"
	"strings"
)

// DefaultDatabaseURL is the ledger used when ATMOST_DATABASE_URL is unset: the local
// PostgreSQL server's "atmost" database.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/atmost?sslmode=disable"

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

// rootCommand declares every command of atmost, built afresh for each Run: a command's flags
// are bound to variables of its own.
func rootCommand() *Command {
	return &Command{Name: "atmost", Subs: []*Command{
		accountsCommand(),
		consoleCommand(),
		controlsCommand(),
		demoCommand(),
		devCommand(),
		epochCommand(),
		eventsCommand(),
		intentsCommand(),
		mcpCommand(),
		migrateCommand(),
		operatorsCommand(),
		parkCommand(),
		policyCommand(),
		producersCommand(),
		rejectsCommand(),
		resolveCommand(),
		restoreCommand(),
		retryCommand(),
		switchCommand(),
		versionCommand(),
	}}
}

// setting returns the environment variable's value, or def when it is unset or blank.
func setting(env Env, name, def string) string {
	if v, ok := env(name); ok && strings.TrimSpace(v) != "" {
		return v
	}
	return def
}
