package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"

	"github.com/atmost/atmost/internal/migrate"
)

func runMigrate(ctx context.Context, io IO, args []string) int {
	fs := flag.NewFlagSet("atmost migrate", flag.ContinueOnError)
	fs.SetOutput(io.Stderr)
	databaseURL := fs.String("database-url", setting(io.Env, "ATMOST_DATABASE_URL", DefaultDatabaseURL), "the ledger database (env ATMOST_DATABASE_URL)")
	create := fs.Bool("create-database", false, "create the database first when it does not exist")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintln(io.Stderr, "Usage: atmost migrate [flags]         apply every pending migration (a no-op when current)")
		fmt.Fprintln(io.Stderr, "       atmost migrate status [flags]  print the applied and the latest schema version")
		fmt.Fprintln(io.Stderr, "\nFlags:")
		fs.PrintDefaults()
	}
	status := len(args) > 0 && args[0] == "status"
	if status {
		args = args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(io.Stderr, "atmost migrate: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return ExitUsage
	}
	latest, err := migrate.Latest()
	if err != nil {
		fmt.Fprintf(io.Stderr, "atmost migrate: %v\n", err)
		return ExitError
	}

	var applied []migrate.Applied
	if !status {
		applied, err = migrate.Up(ctx, *databaseURL, migrate.Options{CreateDatabase: *create})
		for _, a := range applied {
			if !*asJSON {
				fmt.Fprintf(io.Stdout, "applied %s\n", a.Name)
			}
		}
		if err != nil {
			fmt.Fprintf(io.Stderr, "atmost migrate: %v\n", err)
			return ExitError
		}
	}
	current, err := migrate.Current(ctx, *databaseURL)
	if err != nil {
		fmt.Fprintf(io.Stderr, "atmost migrate: %v\n", err)
		return ExitError
	}
	if *asJSON {
		if applied == nil {
			applied = []migrate.Applied{}
		}
		return writeJSON(io, struct {
			Applied []migrate.Applied `json:"applied"`
			Current int64             `json:"current_version"`
			Latest  int64             `json:"latest_version"`
		}{applied, current, latest})
	}
	switch {
	case current == latest && len(applied) == 0 && !status:
		fmt.Fprintf(io.Stdout, "schema already at version %d; nothing to apply\n", current)
	case current == latest:
		fmt.Fprintf(io.Stdout, "schema at version %d (latest)\n", current)
	case current < latest:
		fmt.Fprintf(io.Stdout, "schema at version %d; this binary carries %d: run atmost migrate\n", current, latest)
	default:
		fmt.Fprintf(io.Stdout, "schema at version %d, newer than this binary's %d: upgrade atmost\n", current, latest)
	}
	return ExitOK
}

func writeJSON(io IO, v any) int {
	enc := json.NewEncoder(io.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(io.Stderr, "atmost: write JSON: %v\n", err)
		return ExitError
	}
	return ExitOK
}
