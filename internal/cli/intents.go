package cli

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/jsonview"
	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func intentsCommand() *Command {
	var ls intentsFlags
	return &Command{Name: "intents", Summary: "intents ls, intents show KEY: a page of intents; one with its attempts, evidence, history, reconciliations",
		About: `ls lists a page of intents: key, account, action, state, reason, authorized attempts, last
change. In delivery-key order by default; --sort created or updated orders them by the time they
were stored or last changed (ties in key order), oldest first or, with --desc, newest first.
--since and --until keep the intents whose time is at or after and before the times they give
(a duration back from now, like 15m, or an RFC 3339 time): the sort's time, and the last change
in key order. When the page is full, the command for the next one (--after the page's last
intent) is printed on standard error; with --json it is next_after. A page in key order reads
the intents it shows; one in a time order reads every intent its filters keep.
show prints one intent with its attempts, evidence, history and reconciliation steps.`,
		Subs: []*Command{
			{Name: "ls", Summary: "a page of intents",
				Flags: func(f *Flags) {
					f.String(&ls.state, "state", "S", "", "only intents in this state ("+stateList()+")")
					f.String(&ls.account, "account", "A", "", "only intents of this account")
					f.String(&ls.reason, "reason", "R", "", "only intents whose latest transition has this reason")
					f.String(&ls.since, "since", "DURATION|TIME", "", "only intents whose time is at or after this: a duration back from now (15m, 2h) or an RFC 3339 time")
					f.String(&ls.until, "until", "DURATION|TIME", "", "only intents whose time is before this: a duration back from now or an RFC 3339 time")
					f.String(&ls.sort, "sort", "key|created|updated", "key", "the order: delivery key, or the time stored or last changed")
					f.Bool(&ls.desc, "desc", "with --sort created or updated: newest first")
					f.Int(&ls.limit, "limit", "N", 50, "at most this many intents (1 to 1000)")
					f.String(&ls.after, "after", "KEY|TIME,KEY", "", "start after this intent: the previous page's last, as the command for the next page gives it")
					f.Ledger("the ledger database")
					f.JSON("print JSON instead of a table")
				},
				Run: func(ctx context.Context, c *line) int { return listIntents(ctx, c, ls) }},
			{Name: "show", Summary: "one intent with its attempts, evidence, history and reconciliations", Args: []string{"KEY"},
				Flags: func(f *Flags) { f.Ledger("the ledger database"); f.JSON("print JSON instead of tables") },
				Run: func(ctx context.Context, c *line) int {
					key, code := c.key(c.args[0])
					if code != ExitOK {
						return code
					}
					return showIntent(ctx, c, key)
				}},
		},
	}
}

// intentsFlags are intents ls's flags.
type intentsFlags struct {
	state, account, reason, since, until, sort, after string
	desc                                              bool
	limit                                             int
}

// intentsFilter reads intents ls's flags into the ledger's filter, or returns the exit code of
// a usage error.
func intentsFilter(c *line, p intentsFlags, now time.Time) (ledger.IntentFilter, int) {
	f := ledger.IntentFilter{State: ledger.State(strings.TrimSpace(p.state)), Account: p.account, Reason: ledger.Reason(strings.TrimSpace(p.reason))}
	switch {
	case f.State != "" && !f.State.Valid():
		return f, c.usageError("--state %q: give one of %s", p.state, stateList())
	case c.given("state") && f.State == "":
		return f, c.usageError("--state is empty: name a state (%s), or leave the flag out for every state", stateList())
	case c.given("account") && strings.TrimSpace(f.Account) == "":
		return f, c.usageError("--account is empty: name the account, or leave the flag out for every account")
	case c.given("reason") && f.Reason == "":
		return f, c.usageError("--reason is empty: name a reason, or leave the flag out for every reason")
	}
	if f.Reason != "" {
		rule, ok := f.Reason.Rule()
		if !ok {
			return f, c.usageError("--reason %q: give one of %s", p.reason, strings.Join(reasonNames(f.State), ", "))
		}
		if f.State != "" && rule.State != f.State {
			return f, c.usageError("--state %s and --reason %s contradict each other: %s is a reason of %s; give one of %s",
				f.State, f.Reason, f.Reason, rule.State, strings.Join(reasonNames(f.State), ", "))
		}
	}
	for _, b := range []struct {
		name, value string
		to          *time.Time
	}{{"since", p.since, &f.Since}, {"until", p.until, &f.Until}} {
		if !c.given(b.name) {
			continue
		}
		t, err := parseSince(b.value, now)
		if err != nil {
			return f, c.usageError("--%s %q: %v", b.name, b.value, err)
		}
		*b.to = t
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, c.usageError("--since %s is not before --until %s: nothing could match", timestamp(f.Since), timestamp(f.Until))
	}
	switch sort := strings.TrimSpace(p.sort); sort {
	case "key":
	case string(ledger.SortCreated), string(ledger.SortUpdated):
		f.Sort = ledger.IntentSort(sort)
	default:
		return f, c.usageError("--sort %q: give one of %s", p.sort, strings.Join(ledger.IntentSorts(), ", "))
	}
	f.Descending = p.desc
	if f.Descending && f.Sort == ledger.SortKey {
		return f, c.usageError("--desc orders by time: give --sort created or --sort updated")
	}
	if p.limit < 1 || p.limit > 1000 {
		return f, c.usageError("--limit %d: give 1 to 1000, and page on with --after", p.limit)
	}
	if c.given("after") {
		after := strings.TrimSpace(p.after)
		at, key, timed := strings.Cut(after, ",")
		switch {
		case f.Sort == ledger.SortKey && timed:
			return f, c.usageError("--after %q: in key order, give the key alone", p.after)
		case f.Sort != ledger.SortKey && !timed:
			return f, c.usageError("--after %q: in a time order, give TIME,KEY as the command for the next page prints it", p.after)
		case timed:
			t, err := time.Parse(time.RFC3339Nano, at)
			if err != nil {
				return f, c.usageError("--after %q: %q is not an RFC 3339 time; give TIME,KEY as the command for the next page prints it", p.after, at)
			}
			f.AfterAt, after = t, key
		}
		var code int
		if f.After, code = c.key(after); code != ExitOK {
			return f, code
		}
	}
	return f, ExitOK
}

// reasonNames are the reasons of the state, or every reason, in name order.
func reasonNames(state ledger.State) []string {
	var out []string
	for r, rule := range atmosttype.Reasons() {
		if state == "" || rule.State == state {
			out = append(out, string(r))
		}
	}
	slices.Sort(out)
	return out
}

// cursor is where the page after in starts, as --after takes it: the key, and in a time order
// the time first.
func cursor(f ledger.IntentFilter, in ledger.Intent) string {
	switch f.Sort {
	case ledger.SortCreated:
		return in.CreatedAt.UTC().Format(time.RFC3339Nano) + "," + in.Key.String()
	case ledger.SortUpdated:
		return in.UpdatedAt.UTC().Format(time.RFC3339Nano) + "," + in.Key.String()
	}
	return in.Key.String()
}

func listIntents(ctx context.Context, c *line, p intentsFlags) int {
	io := c.io
	f, code := intentsFilter(c, p, time.Now())
	if code != ExitOK {
		return code
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	page, err := l.ListIntents(ctx, f, p.limit+1)
	if err != nil {
		return c.fail(err)
	}
	var next *string
	if len(page) > p.limit {
		page = page[:p.limit]
		last := cursor(f, page[len(page)-1])
		next = &last
	}
	if c.asJSON {
		out := struct {
			Intents   []jsonview.Intent `json:"intents"`
			NextAfter *string           `json:"next_after"`
		}{Intents: make([]jsonview.Intent, len(page)), NextAfter: next}
		for i, in := range page {
			out.Intents[i] = jsonview.IntentOf(in, false)
		}
		return writeJSON(io, out)
	}
	w := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
	created := f.Sort == ledger.SortCreated
	if created {
		fmt.Fprintln(w, "KEY\tACCOUNT\tACTION\tSTATE\tREASON\tATTEMPTS\tCREATED\tUPDATED")
	} else {
		fmt.Fprintln(w, "KEY\tACCOUNT\tACTION\tSTATE\tREASON\tATTEMPTS\tUPDATED")
	}
	for _, in := range page {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t", in.Key, in.Account, in.Action, in.State, dash(string(in.Reason)), in.AttemptsAuthorized)
		if created {
			fmt.Fprintf(w, "%s\t", timestamp(in.CreatedAt))
		}
		fmt.Fprintf(w, "%s\n", timestamp(in.UpdatedAt))
	}
	_ = w.Flush()
	if next != nil {
		fmt.Fprintf(io.Stderr, "more intents follow: %s\n", nextPage(f, p.limit, *next))
	}
	return ExitOK
}

// nextPage is the command line of the page after, with the filters of this one: a --since or
// --until given as a duration is written as the time it meant, so that every page has the same
// bounds.
func nextPage(f ledger.IntentFilter, limit int, next string) string {
	line := []string{"atmost intents ls"}
	if f.State != "" {
		line = append(line, "--state", string(f.State))
	}
	if f.Account != "" {
		line = append(line, "--account", shellQuote(f.Account))
	}
	if f.Reason != "" {
		line = append(line, "--reason", string(f.Reason))
	}
	if !f.Since.IsZero() {
		line = append(line, "--since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	if !f.Until.IsZero() {
		line = append(line, "--until", f.Until.UTC().Format(time.RFC3339Nano))
	}
	if f.Sort != ledger.SortKey {
		line = append(line, "--sort", string(f.Sort))
	}
	if f.Descending {
		line = append(line, "--desc")
	}
	return strings.Join(append(line, "--limit", fmt.Sprint(limit), "--after", next), " ")
}

func stateList() string {
	names := make([]string, len(atmosttype.States()))
	for i, s := range atmosttype.States() {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// shellQuote quotes s for a shell when it holds anything but plain characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:@/") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// key parses a delivery key given on the command line.
func (c *line) key(s string) (identity.DeliveryKey, int) {
	key, err := identity.ParseDeliveryKey(strings.TrimSpace(s))
	if err != nil {
		return key, c.usageError("%q is not a delivery key: give it as atmost intents ls prints it (dk1: and 64 hex digits)", s)
	}
	return key, ExitOK
}

func showIntent(ctx context.Context, c *line, key identity.DeliveryKey) int {
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	rec, err := l.Inspect(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return c.problem(ExitError, fmt.Sprintf("no intent has the delivery key %s (atmost intents ls lists them)", key))
	}
	if err != nil {
		return c.fail(err)
	}
	wait, err := adapters.IntentWait(ctx, l, adapters.Registered(), c.io.Env, rec.Intent)
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		out := jsonview.RecordOf(rec)
		if wait != nil {
			out.Waiting = &jsonview.Wait{Cause: wait.Cause, Why: wait.String()}
		}
		return writeJSON(c.io, out)
	}
	in := rec.Intent
	w := tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "intent\t%s\n", in.Key)
	fmt.Fprintf(w, "account\t%s\n", in.Account)
	fmt.Fprintf(w, "action\t%s\n", in.Action)
	fmt.Fprintf(w, "target\t%s\n", dash(in.Target))
	if !in.ReplyTo.IsZero() {
		fmt.Fprintf(w, "reply to\t%s\n", in.ReplyTo)
	}
	fmt.Fprintf(w, "request\t%s\n", compact([]byte(in.Request)))
	if in.Occurrence != "" {
		fmt.Fprintf(w, "occurrence\t%s\n", in.Occurrence)
	}
	fmt.Fprintf(w, "state\t%s (%s)\n", in.State, dash(string(in.Reason)))
	if wait != nil {
		fmt.Fprintf(w, "waiting\t%s\n", wait)
	}
	if hold, ok := rec.TextHold(); ok {
		fmt.Fprintf(w, "text held by\t%s\n", hold.Holder)
		if hold.WindowEndsAt != nil {
			fmt.Fprintf(w, "window ends\t%s\n", timestamp(*hold.WindowEndsAt))
		} else {
			fmt.Fprintf(w, "window ends\t%s after the holder is authorized (it was stored first and waits to be sent)\n", hold.Window)
		}
	}
	fmt.Fprintf(w, "attempts\t%d authorized, %d opened\n", in.AttemptsAuthorized, len(rec.Attempts))
	if in.Token != (identity.AttemptToken{}) {
		fmt.Fprintf(w, "latest attempt\t%s (epoch %d, generation %d)\n", in.Token, in.Epoch, in.Generation)
	}
	if in.LeaseExpiresAt != nil {
		fmt.Fprintf(w, "lease expires\t%s\n", timestamp(*in.LeaseExpiresAt))
	}
	if in.NotBefore != nil {
		fmt.Fprintf(w, "not before\t%s\n", timestamp(*in.NotBefore))
	}
	if in.ExpiresAt != nil {
		fmt.Fprintf(w, "expires at\t%s\n", timestamp(*in.ExpiresAt))
	}
	fmt.Fprintf(w, "object\t%s\n", dash(in.ObjectID))
	fmt.Fprintf(w, "created\t%s\n", timestamp(in.CreatedAt))
	fmt.Fprintf(w, "updated\t%s\n", timestamp(in.UpdatedAt))
	_ = w.Flush()

	section(c.io, "attempts", len(rec.Attempts), "TOKEN\tEPOCH\tGENERATION\tCREDENTIAL\tREQUEST HASH\tOPENED", func(w *tabwriter.Writer) {
		for _, a := range rec.Attempts {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\n", a.Token, a.Epoch, a.Generation, a.CredentialVersion, shortHex(a.RequestHash), timestamp(a.CreatedAt))
		}
	})
	section(c.io, "evidence", len(rec.Evidence), "AT\tATTEMPT\tGENERATION\tRESULT\tREASON\tOBJECT\tFENCED\tDETAIL", func(w *tabwriter.Writer) {
		for _, e := range rec.Evidence {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%t\t%s\n", timestamp(e.RecordedAt), e.Token, e.Generation, e.Result, dash(string(e.Reason)), dash(e.ObjectID), e.Fenced, detailText(e.Detail))
		}
	})
	section(c.io, "history", len(rec.Transitions), "SEQ\tAT\tTRANSITION\tREASON\tACTOR\tDETAIL", func(w *tabwriter.Writer) {
		for _, t := range rec.Transitions {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", t.Seq, timestamp(t.At), transition(t.From, t.To), dash(string(t.Reason)), t.Actor, detailText(t.Detail))
		}
	})
	section(c.io, "reconciliations", len(rec.Reconciliations), "AT\tATTEMPT\tSTEP\tRESULT\tOBJECT\tACTOR\tDETAIL", func(w *tabwriter.Writer) {
		for _, r := range rec.Reconciliations {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", timestamp(r.At), r.Token, r.Step, dash(r.Result), dash(r.ObjectID), r.Actor, detailText(r.Detail))
		}
	})
	return ExitOK
}

// section prints one titled table of intents show, or "none" when it has no rows.
func section(io IO, title string, rows int, header string, print func(w *tabwriter.Writer)) {
	fmt.Fprintf(io.Stdout, "\n%s (%d)\n", title, rows)
	if rows == 0 {
		fmt.Fprintln(io.Stdout, "  none")
		return
	}
	w := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	print(w)
	_ = w.Flush()
}

// transition shows "from -> to"; an intent's creation has no from.
func transition(from, to atmosttype.State) string {
	if from == "" {
		return "(new) -> " + string(to)
	}
	return string(from) + " -> " + string(to)
}

// detailText shows a detail object on one line, "-" when it says nothing.
func detailText(b []byte) string {
	c := string(compact(b))
	if c == "{}" || c == "null" {
		return "-"
	}
	return c
}

func shortHex(b []byte) string {
	h := hex.EncodeToString(b)
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}
