// Command sweeper is atmost's recovery pass: it expires leases one way, publishes work again
// for stranded pending intents, retries failed intents as the policy allows and at its rate,
// parks indeterminate intents no reconciler will finish, and drains the outbox. Any number may
// run at once. Run sweeper --help for its settings.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/atmost/atmost/internal/role/sweep"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := sweep.Main(ctx, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	os.Exit(code)
}
