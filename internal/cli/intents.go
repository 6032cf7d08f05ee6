package cli

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

const intentsUsage = `Usage:
  atmost intents ls [--state S] [--account A] [--limit N] [--after KEY] [--json]
  atmost intents show KEY [--json]

ls lists a page of intents in delivery-key order: key, account, action, state, reason,
authorized attempts, last change. When the page is full, the command for the next one (--after
the page's last key) is printed on standard error; with --json it is next_after. show prints
one intent with its attempts, evidence, history and reconciliation steps.
`

// intentJSON is an intent as the intents commands print it. Request is the canonical request
// projection the intent sends; Attempt, Epoch and Generation name its latest attempt.
type intentJSON struct {
	Key                string          `json:"key"`
	Account            string          `json:"account"`
	Action             string          `json:"action"`
	Target             string          `json:"target"`
	Request            json.RawMessage `json:"request,omitempty"`
	Occurrence         string          `json:"occurrence,omitempty"`
	State              ledger.State    `json:"state"`
	Reason             ledger.Reason   `json:"reason"`
	Seq                int64           `json:"seq"`
	AttemptsAuthorized int             `json:"attempts_authorized"`
	Attempt            *string         `json:"attempt"`
	Epoch              int64           `json:"epoch,omitempty"`
	Generation         int64           `json:"generation,omitempty"`
	LeaseExpiresAt     *time.Time      `json:"lease_expires_at"`
	ObjectID           string          `json:"object_id"`
	CreatedAt          time.Time       `json:"created_at"`
	UpdatedAt          time.Time       `json:"updated_at"`
}

func toIntentJSON(in ledger.Intent, withRequest bool) intentJSON {
	j := intentJSON{
		Key: in.Key.String(), Account: in.Account, Action: in.Action, Target: in.Target, Occurrence: in.Occurrence,
		State: in.State, Reason: in.Reason, Seq: in.Seq, AttemptsAuthorized: in.AttemptsAuthorized, Epoch: in.Epoch,
		Generation: in.Generation, LeaseExpiresAt: in.LeaseExpiresAt, ObjectID: in.ObjectID, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt,
	}
	if in.Token != (identity.AttemptToken{}) {
		token := in.Token.String()
		j.Attempt = &token
	}
	if withRequest {
		j.Request = rawJSON([]byte(in.Request))
	}
	return j
}

// rawJSON is b when it is JSON, else b as a JSON string, and {} when b is empty.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	if json.Valid(b) {
		return json.RawMessage(compact(b))
	}
	s, _ := json.Marshal(string(b))
	return s
}

func runIntents(ctx context.Context, io IO, args []string) int {
	var state, account, after *string
	var limit *int
	c, sub, pos, code, done := parseGroup(io, "intents", intentsUsage, args,
		map[string][]string{"ls": {"state", "account", "limit", "after"}, "show": nil},
		map[string][]string{"show": {"KEY"}},
		func(fs *flag.FlagSet) {
			state = fs.String("state", "", "ls: only intents in this state ("+stateList()+")")
			account = fs.String("account", "", "ls: only intents of this account")
			limit = fs.Int("limit", 50, "ls: at most this many intents (1 to 1000)")
			after = fs.String("after", "", "ls: start after this delivery key (the last key of the previous page)")
		})
	if done {
		return code
	}
	if sub == "show" {
		key, code := c.key(pos[0])
		if code != ExitOK {
			return code
		}
		return showIntent(ctx, c, key)
	}

	f := ledger.IntentFilter{State: ledger.State(strings.TrimSpace(*state))}
	if f.State != "" && !f.State.Valid() {
		return c.usageError("--state %q: give one of %s", *state, stateList())
	}
	if c.given("state") && f.State == "" {
		return c.usageError("--state is empty: name a state (%s), or leave the flag out for every state", stateList())
	}
	f.Account = *account
	if c.given("account") && strings.TrimSpace(f.Account) == "" {
		return c.usageError("--account is empty: name the account, or leave the flag out for every account")
	}
	if *limit < 1 || *limit > 1000 {
		return c.usageError("--limit %d: give 1 to 1000, and page on with --after", *limit)
	}
	if c.given("after") {
		if f.After, code = c.key(*after); code != ExitOK {
			return code
		}
	}
	l, closeLedger, err := openLedger(ctx, *c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	page, err := l.ListIntents(ctx, f, *limit+1)
	if err != nil {
		return c.fail(err)
	}
	var next *string
	if len(page) > *limit {
		page = page[:*limit]
		last := page[len(page)-1].Key.String()
		next = &last
	}
	if *c.asJSON {
		out := struct {
			Intents   []intentJSON `json:"intents"`
			NextAfter *string      `json:"next_after"`
		}{Intents: make([]intentJSON, len(page)), NextAfter: next}
		for i, in := range page {
			out.Intents[i] = toIntentJSON(in, false)
		}
		return writeJSON(io, out)
	}
	w := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tACCOUNT\tACTION\tSTATE\tREASON\tATTEMPTS\tUPDATED")
	for _, in := range page {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", in.Key, in.Account, in.Action, in.State, dash(string(in.Reason)), in.AttemptsAuthorized, timestamp(in.UpdatedAt))
	}
	_ = w.Flush()
	if next != nil {
		line := []string{"atmost intents ls"}
		if f.State != "" {
			line = append(line, "--state", string(f.State))
		}
		if f.Account != "" {
			line = append(line, "--account", shellQuote(f.Account))
		}
		line = append(line, "--limit", fmt.Sprint(*limit), "--after", *next)
		fmt.Fprintf(io.Stderr, "more intents follow: %s\n", strings.Join(line, " "))
	}
	return ExitOK
}

func stateList() string {
	names := make([]string, len(ledger.States))
	for i, s := range ledger.States {
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
func (c controlLine) key(s string) (identity.DeliveryKey, int) {
	key, err := identity.ParseDeliveryKey(strings.TrimSpace(s))
	if err != nil {
		return key, c.usageError("%q is not a delivery key: give it as atmost intents ls prints it (dk1: and 64 hex digits)", s)
	}
	return key, ExitOK
}

func showIntent(ctx context.Context, c controlLine, key identity.DeliveryKey) int {
	l, closeLedger, err := openLedger(ctx, *c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	rec, err := l.Inspect(ctx, key)
	if errors.Is(err, ledger.ErrNotFound) {
		fmt.Fprintf(c.io.Stderr, "%s: no intent has the delivery key %s (atmost intents ls lists them)\n", c.name, key)
		return ExitError
	}
	if err != nil {
		return c.fail(err)
	}
	wait, err := intentWait(ctx, c, l, rec.Intent)
	if err != nil {
		return c.fail(err)
	}
	if *c.asJSON {
		out := toRecordJSON(rec)
		if wait != nil {
			out.Waiting = &waitJSON{Cause: wait.Cause, Why: wait.String()}
		}
		return writeJSON(c.io, out)
	}
	in := rec.Intent
	w := tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "intent\t%s\n", in.Key)
	fmt.Fprintf(w, "account\t%s\n", in.Account)
	fmt.Fprintf(w, "action\t%s\n", in.Action)
	fmt.Fprintf(w, "target\t%s\n", dash(in.Target))
	fmt.Fprintf(w, "request\t%s\n", compact([]byte(in.Request)))
	if in.Occurrence != "" {
		fmt.Fprintf(w, "occurrence\t%s\n", in.Occurrence)
	}
	fmt.Fprintf(w, "state\t%s (%s)\n", in.State, dash(string(in.Reason)))
	if wait != nil {
		fmt.Fprintf(w, "waiting\t%s\n", wait)
	}
	fmt.Fprintf(w, "attempts\t%d authorized, %d opened\n", in.AttemptsAuthorized, len(rec.Attempts))
	if in.Token != (identity.AttemptToken{}) {
		fmt.Fprintf(w, "latest attempt\t%s (epoch %d, generation %d)\n", in.Token, in.Epoch, in.Generation)
	}
	if in.LeaseExpiresAt != nil {
		fmt.Fprintf(w, "lease expires\t%s\n", timestamp(*in.LeaseExpiresAt))
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
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", t.Seq, timestamp(t.At), transition(string(t.From), string(t.To)), dash(string(t.Reason)), t.Actor, detailText(t.Detail))
		}
	})
	section(c.io, "reconciliations", len(rec.Reconciliations), "AT\tATTEMPT\tSTEP\tRESULT\tOBJECT\tACTOR\tDETAIL", func(w *tabwriter.Writer) {
		for _, r := range rec.Reconciliations {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", timestamp(r.At), r.Token, r.Step, dash(r.Result), dash(r.ObjectID), r.Actor, detailText(r.Detail))
		}
	})
	return ExitOK
}

// intentWait is why a pending intent waits with no attempt opened, because its account cannot
// be served (adapters.Waits), or nil.
func intentWait(ctx context.Context, c controlLine, l *ledger.Ledger, in ledger.Intent) (*adapters.Wait, error) {
	if in.State != ledger.Pending {
		return nil, nil
	}
	a, err := l.Account(ctx, in.Account)
	if err != nil {
		return nil, err
	}
	waits, err := adapters.Waits(ctx, l, adapters.Builtin(), c.io.Env, []ledger.Account{a})
	if w, ok := waits[a.ID]; ok && err == nil {
		return &w, nil
	}
	return nil, err
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
func transition(from, to string) string {
	if from == "" {
		return "(new) -> " + to
	}
	return from + " -> " + to
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

// recordJSON is intents show's JSON document.
type recordJSON struct {
	Intent          intentJSON           `json:"intent"`
	Attempts        []attemptJSON        `json:"attempts"`
	Evidence        []evidenceJSON       `json:"evidence"`
	History         []transitionJSON     `json:"history"`
	Reconciliations []reconciliationJSON `json:"reconciliations"`
	// Waiting is set for a pending intent whose account cannot be served.
	Waiting *waitJSON `json:"waiting,omitempty"`
}

// waitJSON is why an intent waits: Cause as atmost_account_waiting_intents names it, Why as
// an operator reads it.
type waitJSON struct {
	Cause string `json:"cause"`
	Why   string `json:"why"`
}

type attemptJSON struct {
	Attempt           string    `json:"attempt"`
	Epoch             int64     `json:"epoch"`
	Generation        int64     `json:"generation"`
	CredentialVersion int64     `json:"credential_version"`
	RequestHash       string    `json:"request_hash"`
	CreatedAt         time.Time `json:"created_at"`
}

type evidenceJSON struct {
	Attempt    string          `json:"attempt"`
	Epoch      int64           `json:"epoch"`
	Generation int64           `json:"generation"`
	Result     string          `json:"result"`
	Reason     ledger.Reason   `json:"reason"`
	ObjectID   string          `json:"object_id"`
	Fenced     bool            `json:"fenced"`
	Detail     json.RawMessage `json:"detail"`
	RecordedAt time.Time       `json:"recorded_at"`
}

type transitionJSON struct {
	Seq        int64           `json:"seq"`
	From       ledger.State    `json:"from"`
	To         ledger.State    `json:"to"`
	Reason     ledger.Reason   `json:"reason"`
	Attempt    *string         `json:"attempt"`
	Epoch      int64           `json:"epoch,omitempty"`
	Generation int64           `json:"generation,omitempty"`
	Actor      string          `json:"actor"`
	Detail     json.RawMessage `json:"detail"`
	At         time.Time       `json:"at"`
}

type reconciliationJSON struct {
	Attempt  string          `json:"attempt"`
	Step     string          `json:"step"`
	Result   string          `json:"result"`
	ObjectID string          `json:"object_id"`
	Actor    string          `json:"actor"`
	Detail   json.RawMessage `json:"detail"`
	At       time.Time       `json:"at"`
}

func toRecordJSON(rec ledger.Record) recordJSON {
	out := recordJSON{
		Intent:          toIntentJSON(rec.Intent, true),
		Attempts:        make([]attemptJSON, len(rec.Attempts)),
		Evidence:        make([]evidenceJSON, len(rec.Evidence)),
		History:         make([]transitionJSON, len(rec.Transitions)),
		Reconciliations: make([]reconciliationJSON, len(rec.Reconciliations)),
	}
	for i, a := range rec.Attempts {
		out.Attempts[i] = attemptJSON{a.Token.String(), a.Epoch, a.Generation, a.CredentialVersion, hex.EncodeToString(a.RequestHash), a.CreatedAt}
	}
	for i, e := range rec.Evidence {
		out.Evidence[i] = evidenceJSON{e.Token.String(), e.Epoch, e.Generation, e.Result, e.Reason, e.ObjectID, e.Fenced, rawJSON(e.Detail), e.RecordedAt}
	}
	for i, t := range rec.Transitions {
		j := transitionJSON{Seq: t.Seq, From: t.From, To: t.To, Reason: t.Reason, Epoch: t.Epoch, Generation: t.Generation,
			Actor: t.Actor, Detail: rawJSON(t.Detail), At: t.At}
		if t.Token != nil {
			token := t.Token.String()
			j.Attempt = &token
		}
		out.History[i] = j
	}
	for i, r := range rec.Reconciliations {
		out.Reconciliations[i] = reconciliationJSON{r.Token.String(), r.Step, r.Result, r.ObjectID, r.Actor, rawJSON(r.Detail), r.At}
	}
	return out
}
