// Command reconciler resolves indeterminate intents: a fenced-out worker's confirmed late
// success first, otherwise, after the adapter's reconcile delay, ONE durably claimed lookup on
// the platform per intent. Any number may run at once. Run reconciler --help for its settings.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/atmost/atmost/internal/role/reconcile"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := reconcile.Main(ctx, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	os.Exit(code)
}
