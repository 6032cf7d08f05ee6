// Command dispatcher works the intents of ATMOST_DISPATCH: the one send of each, through the
// account's platform adapter, after a durable attempt and a before-byte authorization. Run
// dispatcher --help for its settings.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/atmost/atmost/internal/role/dispatch"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch.Main(ctx, os.Args[1:], os.LookupEnv, os.Stderr)
	stop()
	os.Exit(code)
}
