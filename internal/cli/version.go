package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"

	"github.com/atmost/atmost/internal/migrate"
	"github.com/atmost/atmost/internal/version"
)

func runVersion(_ context.Context, io IO, args []string) int {
	fs := flag.NewFlagSet("atmost version", flag.ContinueOnError)
	fs.SetOutput(io.Stderr)
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	schema, err := migrate.Latest()
	if err != nil {
		fmt.Fprintf(io.Stderr, "atmost version: %v\n", err)
		return ExitError
	}
	if *asJSON {
		return writeJSON(io, struct {
			Version string `json:"version"`
			Schema  int64  `json:"schema_version"`
			Go      string `json:"go"`
		}{version.String(), schema, runtime.Version()})
	}
	fmt.Fprintf(io.Stdout, "atmost %s (schema version %d, %s)\n", version.String(), schema, runtime.Version())
	return ExitOK
}
