// Command platformsim serves the simulated social platform that atmost's tests and demo
// deliver to: it counts the objects created per delivery key and injects faults from a plan.
// Run platformsim --help for its settings.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/atmost/atmost/internal/tools/platformsim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := platformsim.Main(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
