// Command ingest consumes producers' intents from ATMOST_INTENTS into the ledger and relays the
// ledger's outbox to ATMOST_EVENTS and ATMOST_DISPATCH. Run ingest --help for its settings.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/atmost/atmost/internal/role/ingest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ingest.Main(ctx, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	os.Exit(code)
}
