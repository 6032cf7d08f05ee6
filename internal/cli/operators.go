package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/atmost/atmost/pkg/ledger"
)

func operatorsCommand() *Command {
	var role string
	return &Command{Name: "operators", Summary: "operators add, ls, revoke: who may log in to the console, each with a token of their own",
		About: `Each person who uses the console (atmost console) is an operator with a token of their own:
add prints it once, and the ledger keeps only its SHA-256, so it cannot be shown again (revoke
the operator and add another if it is lost). The console records each change under the
operator's name, as console:NAME. A viewer reads every page and changes nothing; an operator
also parks, resolves, retries, switches, sets policies and replays rejects. revoke ends the
operator's sessions on their next request and its token stops working; a revoked name is
never handed out again. Every add and revoke is written to the control history (atmost
controls log --kind operator). Tokens are never listed.`,
		Subs: []*Command{
			{Name: "add", Summary: "add an operator and print its token, once", Args: []string{"NAME"},
				Flags: func(f *Flags) {
					f.String(&role, "role", string(ledger.RoleViewer)+"|"+string(ledger.RoleOperator), "", "what the operator may do in the console").
						Required("give --role " + string(ledger.RoleViewer) + " (reads only) or --role " + string(ledger.RoleOperator) + " (also changes)")
					f.String(&f.c.reason, "reason", "TEXT", "", "why, written to the control history")
					f.Operator()
					f.Ledger("the ledger database")
					f.JSON("print the operator and its token as JSON")
				},
				Run: func(ctx context.Context, c *line) int { return addOperator(ctx, c, role) }},
			{Name: "ls", Summary: "every operator, its role, and whether it is revoked (never a token)",
				Flags: func(f *Flags) { f.Ledger("the ledger database"); f.JSON("print JSON instead of a table") },
				Run:   listOperators},
			{Name: "revoke", Summary: "end the operator's sessions and refuse its token from now on", Args: []string{"NAME"},
				Flags: func(f *Flags) {
					f.Reason("why, written to the control history")
					f.Operator()
					f.Ledger("the ledger database")
					f.JSON("print the operator as JSON")
				},
				Run: revokeOperator},
		},
	}
}

type operatorJSON struct {
	Name      string  `json:"name"`
	Role      string  `json:"role"`
	CreatedAt string  `json:"created_at,omitempty"`
	RevokedAt *string `json:"revoked_at"`
	Token     string  `json:"token,omitempty"` // only from add, the one time it exists
}

func toOperatorJSON(op ledger.Operator) operatorJSON {
	out := operatorJSON{Name: op.Name, Role: string(op.Role)}
	if !op.CreatedAt.IsZero() {
		out.CreatedAt = timestamp(op.CreatedAt)
	}
	if op.RevokedAt != nil {
		at := timestamp(*op.RevokedAt)
		out.RevokedAt = &at
	}
	return out
}

func addOperator(ctx context.Context, c *line, role string) int {
	name := c.args[0]
	if err := ledger.CheckOperatorName(name); err != nil {
		return c.usageError("%v", err)
	}
	r := ledger.OperatorRole(role)
	if r != ledger.RoleViewer && r != ledger.RoleOperator {
		return c.usageError("--role %q: give %s (reads only) or %s (also changes)", role, ledger.RoleViewer, ledger.RoleOperator)
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
	token, err := l.AddOperator(ctx, name, r, ledger.Actor{Name: actor, Reason: reason})
	if errors.Is(err, ledger.ErrOperatorExists) {
		return c.refused("%v: a name, revoked or not, names one person for good; choose another", err)
	}
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		out := toOperatorJSON(ledger.Operator{Name: name, Role: r})
		out.Token = token
		return writeJSON(c.io, out)
	}
	fmt.Fprintf(c.io.Stdout, "operator %s added (role %s) by %s; its console token, shown this once:\n%s\n", name, r, actor, token)
	c.note("give the token to %s alone: the ledger keeps only its hash; it logs in to the console as console:%s", name, name)
	return ExitOK
}

func listOperators(ctx context.Context, c *line) int {
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	ops, err := l.Operators(ctx)
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		out := make([]operatorJSON, len(ops))
		for i, op := range ops {
			out[i] = toOperatorJSON(op)
		}
		return writeJSON(c.io, out)
	}
	if len(ops) == 0 {
		fmt.Fprintln(c.io.Stdout, "no operator: add one with atmost operators add NAME --role operator")
		return ExitOK
	}
	tw := tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tADDED\tREVOKED")
	for _, op := range ops {
		revoked := "-"
		if op.RevokedAt != nil {
			revoked = timestamp(*op.RevokedAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", op.Name, op.Role, timestamp(op.CreatedAt), revoked)
	}
	_ = tw.Flush()
	return ExitOK
}

func revokeOperator(ctx context.Context, c *line) int {
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
	op, err := l.RevokeOperator(ctx, name, ledger.Actor{Name: actor, Reason: reason})
	if errors.Is(err, ledger.ErrUnknownOperator) || errors.Is(err, ledger.ErrOperatorRevoked) {
		return c.refused("%v", err)
	}
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		return writeJSON(c.io, toOperatorJSON(op))
	}
	fmt.Fprintf(c.io.Stdout, "operator %s revoked by %s: %s; its sessions end on their next request\n", name, actor, reason)
	return ExitOK
}
