// Package command is atmost's operator command (cmd/atmost) as a function, for a program built
// on atmost that adds its own platform adapters: it registers them with platform.Register, then
// calls Main, and its binary is atmost with those adapters (every role, `atmost accounts add
// --platform NAME`, the console). See examples/adapter and docs/platforms.md.
package command

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/atmost/atmost/internal/cli"
)

// Run runs the atmost command named by args (os.Args[1:], e.g. "dispatch" or "accounts add ...")
// on the process's standard output, standard error and environment, and returns its exit code.
func Run(ctx context.Context, args []string) int { return cli.Run(ctx, cli.OS(), args) }

// Main runs the command os.Args names until it ends, SIGINT or SIGTERM, and exits with its code.
func Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
