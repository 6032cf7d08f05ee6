package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/atmost/atmost/internal/migrate"
	"github.com/atmost/atmost/internal/version"
)

func versionCommand() *Command {
	return &Command{Name: "version", Summary: "print the version of this binary and the schema version it expects",
		Flags: func(f *Flags) { f.JSON("print the result as JSON") },
		Run: func(_ context.Context, c *line) int {
			schema, err := migrate.Latest()
			if err != nil {
				return c.fail(err)
			}
			if c.asJSON {
				return writeJSON(c.io, struct {
					Version string `json:"version"`
					Schema  int64  `json:"schema_version"`
					Go      string `json:"go"`
				}{version.String(), schema, runtime.Version()})
			}
			fmt.Fprintf(c.io.Stdout, "atmost %s (schema version %d, %s)\n", version.String(), schema, runtime.Version())
			return ExitOK
		}}
}
