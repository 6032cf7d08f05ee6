package cli

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
)

const epochUsage = `Usage:
  atmost epoch show [--json]
  atmost epoch bump --reason TEXT [--operator NAME] [--json]

The restore epoch fences every worker: attempts and completions of an older epoch are refused
everywhere. After restoring the ledger from a backup, bump the epoch BEFORE any worker
reconnects (the restore protocol: docs/design.md#the-restore-protocol). Every bump is
written to the control history (atmost controls log) with the operator.
`

func runEpoch(ctx context.Context, io IO, args []string) int {
	c, sub, code, done := parseControl(io, "epoch", epochUsage, args, map[string][]string{"show": nil, "bump": {"reason", "operator"}}, func(*flag.FlagSet) {})
	if done {
		return code
	}
	var operator, reason string
	if sub == "bump" {
		if operator, reason, code = c.change(); code != ExitOK {
			return code
		}
	}
	l, closeLedger, err := openLedger(ctx, *c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	if sub == "show" {
		e, err := l.CurrentEpoch(ctx)
		if err != nil {
			return c.fail(err)
		}
		if *c.asJSON {
			return writeJSON(io, e)
		}
		w := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "EPOCH\tSINCE\tOPERATOR\tREASON")
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", e.Epoch, timestamp(e.At), e.Actor, e.Reason)
		_ = w.Flush()
		return ExitOK
	}
	epoch, err := l.BumpEpoch(ctx, operator, reason)
	if err != nil {
		return c.fail(err)
	}
	if *c.asJSON {
		return writeJSON(io, struct {
			Before int64  `json:"before"`
			After  int64  `json:"after"`
			Actor  string `json:"actor"`
			Reason string `json:"reason"`
		}{epoch - 1, epoch, operator, reason})
	}
	fmt.Fprintf(io.Stdout, "epoch: %d -> %d (by %s: %s)\nevery attempt and completion of epoch %d or older is refused from now on\n", epoch-1, epoch, operator, reason, epoch-1)
	return ExitOK
}
