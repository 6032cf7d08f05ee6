package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/atmost/atmost/pkg/ledger"
)

func epochCommand() *Command {
	return &Command{Name: "epoch", Summary: "epoch show, epoch bump: the restore epoch (bump it after a restore, before any worker starts)",
		About: `The restore epoch fences every worker: attempts and completions of an older epoch are refused
everywhere. After restoring the ledger from a backup, bump the epoch BEFORE any worker
reconnects (the restore protocol: docs/design.md#the-restore-protocol). Every bump is
written to the control history (atmost controls log) with the operator.`,
		Subs: []*Command{
			{Name: "show", Summary: "the current epoch, since when, by whom and why",
				Flags: func(f *Flags) { f.Ledger("the ledger database"); f.JSON("print JSON instead of a table") },
				Run:   func(ctx context.Context, c *line) int { return runEpoch(ctx, c, false) }},
			{Name: "bump", Summary: "begin the next epoch: everything of the current one is refused from then on",
				Flags: func(f *Flags) {
					f.Reason("why, written to the control history")
					f.Operator()
					f.Ledger("the ledger database")
					f.JSON("print the change as JSON")
				},
				Run: func(ctx context.Context, c *line) int { return runEpoch(ctx, c, true) }},
		},
	}
}

func runEpoch(ctx context.Context, c *line, bump bool) int {
	io := c.io
	var operator, reason string
	var code int
	if bump {
		if operator, reason, code = c.change(); code != ExitOK {
			return code
		}
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	if !bump {
		e, err := l.CurrentEpoch(ctx)
		if err != nil {
			return c.fail(err)
		}
		if c.asJSON {
			return writeJSON(io, e)
		}
		w := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "EPOCH\tSINCE\tOPERATOR\tREASON")
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", e.Epoch, timestamp(e.At), e.Actor, e.Reason)
		_ = w.Flush()
		return ExitOK
	}
	epoch, err := l.BumpEpoch(ctx, ledger.Actor{Name: operator, Reason: reason})
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
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
