package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/atmost/atmost/internal/jsonview"
	"github.com/atmost/atmost/pkg/ledger"
)

func switchCommand() *Command {
	set := func(name, summary string, engaged bool) *Command {
		var account string
		return &Command{Name: name, Summary: summary,
			Flags: func(f *Flags) {
				f.String(&account, "account", "A", "", "the account's switch (default: the global switch)")
				f.Reason("why, written to the control history")
				f.Operator()
				f.Ledger("the ledger database")
				f.JSON("print the change as JSON")
			},
			Run: func(ctx context.Context, c *line) int { return setSwitch(ctx, c, account, engaged) },
		}
	}
	return &Command{Name: "switch", Summary: "switch ls, switch on, switch off: the global and per-account kill switches",
		About: `A kill switch that is on stops every new authorization in its scope: without --account the
global switch (every account), with --account that account's. Work already authorized is not
recalled; waiting work opens no attempt while a switch is on and goes on when it is off.
Every change is written to the control history (atmost controls log) with the operator.`,
		Subs: []*Command{
			{Name: "ls", Summary: "the global switch and every account's",
				Flags: func(f *Flags) { f.Ledger("the ledger database"); f.JSON("print JSON instead of a table") },
				Run:   listSwitches},
			set("on", "stop every new authorization in the scope", true),
			set("off", "let the work of the scope go on", false),
		},
	}
}

func setSwitch(ctx context.Context, c *line, account string, engaged bool) int {
	scope, code := c.account(account)
	if code != ExitOK {
		return code
	}
	operator, reason, code := c.change()
	if code != ExitOK {
		return code
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	ch, err := l.SetSwitch(ctx, scope, engaged, ledger.Actor{Name: operator, Reason: reason})
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		out := struct {
			Before *jsonview.Switch `json:"before"`
			After  jsonview.Switch  `json:"after"`
		}{After: jsonview.SwitchOf(ch.After)}
		if ch.Before != nil {
			b := jsonview.SwitchOf(*ch.Before)
			out.Before = &b
		}
		return writeJSON(c.io, out)
	}
	var before *bool
	if ch.Before != nil {
		before = &ch.Before.Engaged
	}
	fmt.Fprintf(c.io.Stdout, "%s switch: %s -> %s (by %s: %s)\n", scopeName("switch", scope), onOff(before), onOff(&ch.After.Engaged), operator, reason)
	return ExitOK
}

func listSwitches(ctx context.Context, c *line) int {
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	switches, err := l.Switches(ctx)
	if err != nil {
		return c.fail(err)
	}
	// The global switch is always listed, set or not; the ledger lists it first when set.
	out := []jsonview.Switch{{Scope: ledger.GlobalScope}}
	for _, s := range switches {
		if s.Scope == ledger.GlobalScope {
			out[0] = jsonview.SwitchOf(s)
		} else {
			out = append(out, jsonview.SwitchOf(s))
		}
	}
	if c.asJSON {
		return writeJSON(c.io, out)
	}
	w := tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SWITCH\tSTATE\tSINCE\tOPERATOR\tREASON")
	for _, s := range out {
		state, since := onOff(&s.Engaged), "-"
		if s.UpdatedAt == nil {
			state = onOff(nil)
		} else {
			since = timestamp(*s.UpdatedAt)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", scopeName("switch", s.Scope), state, since, dash(s.Actor), s.Reason)
	}
	_ = w.Flush()
	return ExitOK
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
