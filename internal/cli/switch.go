package cli

import (
	"context"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/atmost/atmost/pkg/ledger"
)

const switchUsage = `Usage:
  atmost switch ls [--json]
  atmost switch on  [--account A] --reason TEXT [--operator NAME] [--json]
  atmost switch off [--account A] --reason TEXT [--operator NAME] [--json]

A kill switch that is on stops every new authorization in its scope: without --account the
global switch (every account), with --account that account's. Work already authorized is not
recalled; waiting work opens no attempt while a switch is on and goes on when it is off.
Every change is written to the control history (atmost controls log) with the operator.
`

// switchJSON is a kill switch as the switch commands print it. Scope "" is the global switch;
// UpdatedAt is null for a switch never set.
type switchJSON struct {
	Scope     string     `json:"scope"`
	Engaged   bool       `json:"engaged"`
	Reason    string     `json:"reason"`
	Actor     string     `json:"actor"`
	UpdatedAt *time.Time `json:"updated_at"`
}

func toSwitchJSON(s ledger.Switch) switchJSON {
	at := s.UpdatedAt
	return switchJSON{s.Scope, s.Engaged, s.Reason, s.Actor, &at}
}

func runSwitch(ctx context.Context, io IO, args []string) int {
	var account *string
	change := []string{"account", "reason", "operator"}
	c, sub, code, done := parseControl(io, "switch", switchUsage, args, map[string][]string{"ls": nil, "on": change, "off": change}, func(fs *flag.FlagSet) {
		account = fs.String("account", "", "on, off: the account's switch (default: the global switch)")
	})
	if done {
		return code
	}
	if sub == "ls" {
		return listSwitches(ctx, c)
	}
	scope, code := c.account(*account)
	if code != ExitOK {
		return code
	}
	operator, reason, code := c.change()
	if code != ExitOK {
		return code
	}
	l, closeLedger, err := openLedger(ctx, *c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	ch, err := l.SetSwitch(ctx, scope, sub == "on", operator, reason)
	if err != nil {
		return c.fail(err)
	}
	if *c.asJSON {
		out := struct {
			Before *switchJSON `json:"before"`
			After  switchJSON  `json:"after"`
		}{After: toSwitchJSON(ch.After)}
		if ch.Before != nil {
			b := toSwitchJSON(*ch.Before)
			out.Before = &b
		}
		return writeJSON(io, out)
	}
	var before *bool
	if ch.Before != nil {
		before = &ch.Before.Engaged
	}
	fmt.Fprintf(io.Stdout, "%s switch: %s -> %s (by %s: %s)\n", scopeName("switch", scope), onOff(before), onOff(&ch.After.Engaged), operator, reason)
	return ExitOK
}

func listSwitches(ctx context.Context, c controlLine) int {
	l, closeLedger, err := openLedger(ctx, *c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	switches, err := l.Switches(ctx)
	if err != nil {
		return c.fail(err)
	}
	// The global switch is always listed, set or not; the ledger lists it first when set.
	out := []switchJSON{{Scope: ledger.GlobalScope}}
	for _, s := range switches {
		if s.Scope == ledger.GlobalScope {
			out[0] = toSwitchJSON(s)
		} else {
			out = append(out, toSwitchJSON(s))
		}
	}
	if *c.asJSON {
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
