package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/atmost/atmost/pkg/ledger"
)

func producersCommand() *Command {
	var accounts []string
	return &Command{Name: "producers", Summary: "producers add, ls, revoke: who may use ingest's HTTP API, for which accounts, each with a token of their own",
		About: `Each producer that publishes through ingest's HTTP API (ingest --http-api) has a token of its
own, bound to the accounts it may act for: with it, it publishes those accounts' intents, reads
their outcomes and streams their events, and nothing of any other account. add prints the token
once, and the ledger keeps only its SHA-256, so it cannot be shown again (revoke the producer and
add another if it is lost). revoke refuses the token from its next request on and ends its open
event streams; a revoked name is never handed out again. Every add and revoke is written to the
control history (atmost controls log --kind producer). Tokens are never listed.`,
		Subs: []*Command{
			{Name: "add", Summary: "add a producer bound to its accounts and print its token, once", Args: []string{"NAME"},
				Flags: func(f *Flags) {
					f.Strings(&accounts, "account", "A", "an account the token may act for").
						Required("name each account the producer may act for")
					f.String(&f.c.reason, "reason", "TEXT", "", "why, written to the control history")
					f.Operator()
					f.Ledger("the ledger database")
					f.JSON("print the producer and its token as JSON")
				},
				Run: func(ctx context.Context, c *line) int { return addProducer(ctx, c, accounts) }},
			{Name: "ls", Summary: "every producer, its accounts, and whether it is revoked (never a token)",
				Flags: func(f *Flags) { f.Ledger("the ledger database"); f.JSON("print JSON instead of a table") },
				Run:   listProducers},
			{Name: "revoke", Summary: "refuse the producer's token from now on and end its event streams", Args: []string{"NAME"},
				Flags: func(f *Flags) {
					f.Reason("why, written to the control history")
					f.Operator()
					f.Ledger("the ledger database")
					f.JSON("print the producer as JSON")
				},
				Run: revokeProducer},
		},
	}
}

type producerJSON struct {
	Name      string   `json:"name"`
	Accounts  []string `json:"accounts"`
	CreatedAt string   `json:"created_at,omitempty"`
	RevokedAt *string  `json:"revoked_at"`
	Token     string   `json:"token,omitempty"` // only from add, the one time it exists
}

func toProducerJSON(p ledger.Producer) producerJSON {
	out := producerJSON{Name: p.Name, Accounts: p.Accounts}
	if !p.CreatedAt.IsZero() {
		out.CreatedAt = timestamp(p.CreatedAt)
	}
	if p.RevokedAt != nil {
		at := timestamp(*p.RevokedAt)
		out.RevokedAt = &at
	}
	return out
}

func addProducer(ctx context.Context, c *line, accounts []string) int {
	name := c.args[0]
	if err := ledger.CheckProducerName(name); err != nil {
		return c.usageError("%v", err)
	}
	if err := ledger.CheckProducerAccounts(accounts); err != nil {
		return c.usageError("--account: %v", err)
	}
	reason := strings.TrimSpace(c.reason)
	if err := ledger.CheckNote("--reason", reason); err != nil {
		return c.usageError("%v", err)
	}
	actor, err := operatorName(c.io, c.operator)
	if err != nil {
		return c.usageError("%v", err)
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	token, err := l.AddProducer(ctx, name, accounts, ledger.Actor{Name: actor, Reason: reason})
	if errors.Is(err, ledger.ErrProducerExists) {
		return c.refused("%v: a name, revoked or not, names one producer for good; choose another", err)
	}
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		out := toProducerJSON(ledger.Producer{Name: name, Accounts: accounts})
		out.Token = token
		return writeJSON(c.io, out)
	}
	fmt.Fprintf(c.io.Stdout, "producer %s added for %s by %s; its token, shown this once:\n%s\n", name, strings.Join(quoteAll(accounts), ", "), actor, token)
	c.note("give the token to %s alone: the ledger keeps only its hash; it is sent as Authorization: Bearer <token>", name)
	return ExitOK
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func listProducers(ctx context.Context, c *line) int {
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	ps, err := l.Producers(ctx)
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		out := make([]producerJSON, len(ps))
		for i, p := range ps {
			out[i] = toProducerJSON(p)
		}
		return writeJSON(c.io, out)
	}
	if len(ps) == 0 {
		fmt.Fprintln(c.io.Stdout, "no producer: add one with atmost producers add NAME --account A")
		return ExitOK
	}
	tw := tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tACCOUNTS\tADDED\tREVOKED")
	for _, p := range ps {
		revoked := "-"
		if p.RevokedAt != nil {
			revoked = timestamp(*p.RevokedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, strings.Join(quoteAll(p.Accounts), ","), timestamp(p.CreatedAt), revoked)
	}
	_ = tw.Flush()
	return ExitOK
}

func revokeProducer(ctx context.Context, c *line) int {
	name := c.args[0]
	actor, reason, code := c.change()
	if code != ExitOK {
		return code
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	p, err := l.RevokeProducer(ctx, name, ledger.Actor{Name: actor, Reason: reason})
	if errors.Is(err, ledger.ErrUnknownProducer) || errors.Is(err, ledger.ErrProducerRevoked) {
		return c.refused("%v", err)
	}
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		return writeJSON(c.io, toProducerJSON(p))
	}
	fmt.Fprintf(c.io.Stdout, "producer %s revoked by %s: %s; its token is refused from its next request on\n", name, actor, reason)
	return ExitOK
}
