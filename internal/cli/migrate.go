package cli

import (
	"context"
	"fmt"

	"github.com/atmost/atmost/internal/migrate"
)

func migrateCommand() *Command {
	var create bool
	migrateFlags := func(f *Flags) {
		f.Ledger("the ledger database")
		f.JSON("print the result as JSON")
	}
	return &Command{Name: "migrate", Summary: "apply the ledger schema to ATMOST_DATABASE_URL (migrate status: show it)",
		About: "Applies every pending migration (a no-op when the schema is current); migrate status prints the applied and the latest schema version.",
		Flags: func(f *Flags) {
			f.Bool(&create, "create-database", "create the database first when it does not exist")
			migrateFlags(f)
		},
		Run: func(ctx context.Context, c *line) int { return runMigrate(ctx, c, create, false) },
		Subs: []*Command{{Name: "status", Summary: "print the applied and the latest schema version", Flags: migrateFlags,
			Run: func(ctx context.Context, c *line) int { return runMigrate(ctx, c, false, true) }}},
	}
}

// appliedJSON is one migration migrate applied, as --json prints it.
type appliedJSON struct {
	Version int64  `json:"version"`
	Name    string `json:"name"`
}

func runMigrate(ctx context.Context, c *line, create, status bool) int {
	databaseURL, asJSON := &c.databaseURL, &c.asJSON
	io := c.io
	latest, err := migrate.Latest()
	if err != nil {
		return c.fail(err)
	}

	var applied []migrate.Applied
	if !status {
		applied, err = migrate.Up(ctx, *databaseURL, migrate.Options{CreateDatabase: create})
		for _, a := range applied {
			if !*asJSON {
				fmt.Fprintf(io.Stdout, "applied %s\n", a.Name)
			}
		}
		if err != nil {
			return c.fail(err)
		}
	}
	current, err := migrate.Current(ctx, *databaseURL)
	if err != nil {
		return c.fail(err)
	}
	if *asJSON {
		out := make([]appliedJSON, len(applied))
		for i, a := range applied {
			out[i] = appliedJSON{a.Version, a.Name}
		}
		return writeJSON(io, struct {
			Applied []appliedJSON `json:"applied"`
			Current int64         `json:"current_version"`
			Latest  int64         `json:"latest_version"`
		}{out, current, latest})
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
