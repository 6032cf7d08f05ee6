// Command atmost is the operator command of atmost: it applies the ledger schema and reports
// its version. Run atmost help for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/atmost/atmost/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, cli.OS(), os.Args[1:])
	stop()
	os.Exit(code)
}
