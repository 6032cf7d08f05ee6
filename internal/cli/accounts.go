package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/jsonview"
	"github.com/atmost/atmost/pkg/ledger"
)

func accountsCommand() *Command {
	var platformName, settings, ref, contract string
	change := func(f *Flags) {
		f.Reason("why, written to the control history")
		f.Operator()
		f.Ledger("the ledger database")
		f.JSON("print the change as JSON")
	}
	platformFlag := func(f *Flags, usage string) *Flag {
		return f.String(&platformName, "platform", "P", "", usage+" ("+platformList()+")")
	}
	contractFlag := func(f *Flags) {
		f.String(&contract, "contract-version", "V", "", "the platform contract version to pin (empty pins none)")
	}
	changeCommand := func(name, summary string, flags func(f *Flags)) *Command {
		return &Command{Name: name, Summary: summary, Args: []string{"ACCOUNT"},
			Flags: func(f *Flags) {
				if flags != nil {
					flags(f)
				}
				change(f)
			},
			Run: func(ctx context.Context, c *line) int {
				return changeAccount(ctx, c, name, accountFlags{platformName, settings, ref, contract})
			},
		}
	}
	show := func(f *Flags) { f.Ledger("the ledger database"); f.JSON("print JSON instead of a table") }
	return &Command{Name: "accounts", Summary: "accounts add, ls, show, update, disable, enable, rotate, revoke, resume: checked by their adapter, every change in the control history",
		About: `add, update and rotate open the platform's adapter as the roles will, sending nothing, and
refuse what it refuses (an unknown platform, a setting it does not know or needs) with its
own message; nothing is stored then. The credential itself never enters the ledger:
--credential-ref says where it lives (env:NAME or file:/path). Where it can be read here it
is checked too, never printed; where it cannot, the command says so and the roles must read
it. A new platform or new settings move the credential version on, as rotate does: update
refuses them while an intent of the account is authorized or indeterminate. Every change is
written to the control history (atmost controls log).`,
		Subs: []*Command{
			changeCommand("add", "configure an account, checked by its adapter", func(f *Flags) {
				platformFlag(f, "the platform adapter that serves the account").Required("name the adapter (" + platformList() + ")")
				// Left out, the adapter is asked about no settings (its message says what it needs)
				// and the ledger stores {}.
				f.String(&settings, "settings", "JSON", "", "the adapter's settings for the account, a JSON object").Default("{}")
				f.String(&ref, "credential-ref", "REF", "", "where the credential lives (env:NAME or file:/path)")
				contractFlag(f)
			}),
			{Name: "ls", Summary: "every account, its state, and why its intents wait, if they do",
				Flags: show, Run: func(ctx context.Context, c *line) int { return showAccounts(ctx, c, nil) }},
			{Name: "show", Summary: "one account: its settings, credential, adapter, pending intents and why they wait",
				Args: []string{"ACCOUNT"}, Flags: show, Run: func(ctx context.Context, c *line) int { return showAccounts(ctx, c, c.args) }},
			changeCommand("update", "change its platform, settings or contract version", func(f *Flags) {
				platformFlag(f, "the platform adapter that serves the account")
				f.String(&settings, "settings", "JSON", "", "the adapter's settings for the account, a JSON object")
				contractFlag(f)
			}),
			changeCommand("disable", "its intents wait, never authorized, until enable", nil),
			changeCommand("enable", "serve the account again", nil),
			changeCommand("rotate", "a new credential version: attempts opened with the old one are refused", func(f *Flags) {
				f.String(&ref, "credential-ref", "REF", "", "where the new credential lives (env:NAME or file:/path; default the same reference)")
			}),
			changeCommand("revoke", "every authorization refused until the next rotate", nil),
			{Name: "resume", Summary: "serve an account its health holds (after a rotate, once its unknowns are looked into, or a platform known to be back)",
				Args: []string{"ACCOUNT"}, Flags: change, Run: resumeAccount},
		},
	}
}

// accountFlags are the values of the flags an account change may take; a subcommand that does
// not take one leaves it empty.
type accountFlags struct {
	platform, settings, ref, contract string
}

// changeAccount runs accounts add, update, disable, enable, rotate and revoke.
func changeAccount(ctx context.Context, c *line, sub string, v accountFlags) int {
	account := c.args[0]
	var u ledger.AccountUpdate
	if sub == "update" {
		if c.given("platform") {
			u.Platform = &v.platform
		}
		if c.given("settings") {
			u.Settings = json.RawMessage(v.settings)
		}
		if c.given("contract-version") {
			u.ContractVersion = &v.contract
		}
		if u.Platform == nil && u.Settings == nil && u.ContractVersion == nil {
			return c.usageError("give what to change: --platform, --settings or --contract-version")
		}
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

	var ch ledger.AccountChange
	switch sub {
	case "add":
		a := ledger.Account{ID: account, Platform: v.platform, Settings: json.RawMessage(v.settings), CredentialRef: v.ref, ContractVersion: v.contract}
		if !c.checkAccount(a) {
			return ExitError
		}
		if err := l.AddAccount(ctx, a, ledger.Actor{Name: operator, Reason: reason}); err != nil {
			return c.fail(err)
		}
		if ch.After, err = l.Account(ctx, account); err != nil {
			return c.fail(err)
		}
	case "update":
		if u.Platform != nil || u.Settings != nil {
			var a ledger.Account
			if a, err = l.Account(ctx, account); err != nil {
				return c.fail(err)
			}
			if u.Platform != nil {
				a.Platform = *u.Platform
			}
			if u.Settings != nil {
				a.Settings = u.Settings
			}
			if !c.checkAccount(a) {
				return ExitError
			}
		}
		ch, err = l.UpdateAccount(ctx, account, u, ledger.Actor{Name: operator, Reason: reason})
	case "disable", "enable":
		ch, err = l.SetAccountDisabled(ctx, account, sub == "disable", ledger.Actor{Name: operator, Reason: reason})
	case "rotate":
		var a ledger.Account
		if a, err = l.Account(ctx, account); err != nil {
			return c.fail(err)
		}
		if v.ref != "" {
			a.CredentialRef = v.ref
		}
		if !c.checkAccount(a) {
			return ExitError
		}
		ch, err = l.RotateCredential(ctx, account, v.ref, ledger.Actor{Name: operator, Reason: reason})
	case "revoke":
		ch, err = l.RevokeCredential(ctx, account, ledger.Actor{Name: operator, Reason: reason})
	}
	if errors.Is(err, ledger.ErrAccountBusy) {
		return c.refused("%v: wait until they are published or failed, or park them (atmost intents ls --account %s --state indeterminate)",
			err, shellQuote(account))
	}
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		out := struct {
			Before *jsonview.Account `json:"before"`
			After  jsonview.Account  `json:"after"`
		}{After: jsonview.AccountOf(ch.After)}
		if sub != "add" {
			b := jsonview.AccountOf(ch.Before)
			out.Before = &b
		}
		return writeJSON(c.io, out)
	}
	a, stdout := ch.After, c.io.Stdout
	switch sub {
	case "add":
		fmt.Fprintf(stdout, "account %s added (platform %s, credential version %d) by %s: %s\n", a.ID, a.Platform, a.CredentialVersion, operator, reason)
	case "update":
		fmt.Fprintf(stdout, "account %s updated (%s) by %s: %s\n", a.ID, describeFields(accountFields(ch.Before), accountFields(a)), operator, reason)
	case "disable", "enable":
		fmt.Fprintf(stdout, "account %s: %s -> %s by %s: %s\n", a.ID, enabledName(ch.Before.Disabled), enabledName(a.Disabled), operator, reason)
	case "rotate":
		fmt.Fprintf(stdout, "account %s: credential %s, version %d by %s: %s\n", a.ID, dash(a.CredentialRef), a.CredentialVersion, operator, reason)
	case "revoke":
		fmt.Fprintf(stdout, "account %s: revoked (credential version %d) by %s: %s; rotate to use it again\n", a.ID, a.CredentialVersion, operator, reason)
	}
	return ExitOK
}

// resumeAccount is accounts resume ACCOUNT: an operator's word that a holding account serves
// again (docs/operators.md#account-health).
func resumeAccount(ctx context.Context, c *line) int {
	account := c.args[0]
	operator, reason, code := c.change()
	if code != ExitOK {
		return code
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	ch, err := l.ResumeAccount(ctx, account, ledger.Actor{Name: operator, Reason: reason})
	if errors.Is(err, ledger.ErrNotHolding) {
		return c.refused("account %s is serving: nothing to resume", account)
	}
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		return writeJSON(c.io, struct {
			Account string `json:"account"`
			Before  string `json:"before"`
			Cause   string `json:"cause"`
			After   string `json:"after"`
		}{account, string(ch.From), ch.Cause, string(ch.To)})
	}
	fmt.Fprintf(c.io.Stdout, "account %s: %s (%s) -> serving by %s: %s\n", account, ch.From, ch.Cause, operator, reason)
	return ExitOK
}

// healthLine says an account's health for accounts show: its state, cause, since when and the
// next probe.
func healthLine(h ledger.Health) string {
	if h.State == ledger.Serving {
		return "serving"
	}
	s := fmt.Sprintf("%s (%s) since %s", h.State, h.Cause, timestamp(h.Since))
	switch {
	case !h.NextProbe.IsZero():
		s += ", next probe " + timestamp(h.NextProbe)
	case h.Cause == ledger.CauseUnknownOutcomes:
		s += ", no probe: serves again once its unknown outcomes are reconciled, or atmost accounts resume " + shellQuote(h.Account)
	default:
		s += ", no probe: atmost accounts resume " + shellQuote(h.Account) + " ends it"
	}
	return s
}

// checkAccount opens a's adapter as the roles will, sending nothing (adapters.CheckAccount),
// and reports a refusal; a credential that cannot be read here is said on standard error, and
// is no refusal.
func (c *line) checkAccount(a ledger.Account) bool {
	check, err := adapters.CheckAccount(adapters.Registered(), a, c.io.Env)
	if err != nil {
		c.refused("%v; nothing was stored", err)
		return false
	}
	if check.Credential == adapters.CredentialUnread {
		c.note("note: credential %s: %s; the roles that serve the account must be able to read it", a.CredentialRef, check.Unread)
	}
	return true
}

func platformList() string { return strings.Join(adapters.Registered().Names(), ", ") }

func enabledName(disabled bool) string {
	if disabled {
		return "disabled"
	}
	return "enabled"
}

// accountFields is an account's settable columns as the control history holds them, for
// describeFields.
func accountFields(a ledger.Account) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"platform": a.Platform, "settings": jsonview.Raw(a.Settings), "credential_ref": a.CredentialRef,
		"credential_version": a.CredentialVersion, "revoked": a.Revoked, "disabled": a.Disabled, "contract_version": a.ContractVersion})
	return b
}

// showAccounts is accounts ls (pos empty) and accounts show ACCOUNT.
func showAccounts(ctx context.Context, c *line, pos []string) int {
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	var accounts []ledger.Account
	if len(pos) == 0 {
		accounts, err = l.Accounts(ctx)
	} else {
		var a ledger.Account
		a, err = l.Account(ctx, pos[0])
		accounts = []ledger.Account{a}
	}
	if err != nil {
		return c.fail(err)
	}
	waits, err := adapters.Waits(ctx, l, adapters.Registered(), c.io.Env, accounts)
	if err != nil {
		return c.fail(err)
	}
	ids := make([]string, len(accounts))
	for i, a := range accounts {
		ids[i] = a.ID
	}
	healths, err := l.AccountHealth(ctx, ids...)
	if err != nil {
		return c.fail(err)
	}
	health := make(map[string]ledger.Health, len(healths))
	for _, h := range healths {
		health[h.Account] = h
	}
	if len(pos) == 0 {
		return listAccounts(c, accounts, waits, health)
	}
	a := accounts[0]
	pending, err := l.PendingCounts(ctx, []string{a.ID})
	if err != nil {
		return c.fail(err)
	}
	check, checkErr := adapters.CheckAccount(adapters.Registered(), a, c.io.Env)
	if c.asJSON {
		out := struct {
			jsonview.Account
			Pending int64           `json:"pending_intents"`
			Waiting *string         `json:"waiting"`
			Cause   *string         `json:"waiting_cause"`
			Health  jsonview.Health `json:"health"`
			Adapter string          `json:"adapter"`
			// Credential is what this command could see of the credential (none, read, unread).
			Credential adapters.CredentialCheck `json:"credential_check"`
		}{Account: jsonview.AccountOf(a), Pending: pending[a.ID], Adapter: "opens", Credential: check.Credential, Health: jsonview.HealthOf(health[a.ID])}
		if w, ok := waits[a.ID]; ok {
			text, cause := w.String(), w.Cause
			out.Waiting, out.Cause = &text, &cause
		}
		if checkErr != nil {
			out.Adapter = checkErr.Error()
		}
		return writeJSON(c.io, out)
	}
	w := tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "account\t%s\n", a.ID)
	fmt.Fprintf(w, "platform\t%s\n", a.Platform)
	fmt.Fprintf(w, "settings\t%s\n", compact(a.Settings))
	credential := fmt.Sprintf("%s (version %d)", dash(a.CredentialRef), a.CredentialVersion)
	switch check.Credential {
	case adapters.CredentialRead:
		credential += ", readable here"
	case adapters.CredentialUnread:
		credential += ", " + check.Unread
	}
	fmt.Fprintf(w, "credential\t%s\n", credential)
	fmt.Fprintf(w, "state\t%s\n", accountState(a))
	fmt.Fprintf(w, "health\t%s\n", healthLine(health[a.ID]))
	fmt.Fprintf(w, "contract\t%s\n", dash(a.ContractVersion))
	adapter := "opens (nothing sent)"
	if checkErr != nil {
		adapter = "does not open: " + checkErr.Error()
	}
	fmt.Fprintf(w, "adapter\t%s\n", adapter)
	fmt.Fprintf(w, "pending\t%d intents\n", pending[a.ID])
	if wait, ok := waits[a.ID]; ok {
		fmt.Fprintf(w, "held\t%s: its pending intents wait\n", wait)
	}
	fmt.Fprintf(w, "created\t%s\n", timestamp(a.CreatedAt))
	fmt.Fprintf(w, "updated\t%s\n", timestamp(a.UpdatedAt))
	_ = w.Flush()
	fmt.Fprintf(c.io.Stdout, "\nits changes: atmost controls log --kind account\n")
	return ExitOK
}

func listAccounts(c *line, accounts []ledger.Account, waits map[string]adapters.Wait, health map[string]ledger.Health) int {
	if c.asJSON {
		type listed struct {
			jsonview.Account
			Health jsonview.Health `json:"health"`
		}
		out := make([]listed, len(accounts))
		for i, a := range accounts {
			out[i] = listed{jsonview.AccountOf(a), jsonview.HealthOf(health[a.ID])}
		}
		return writeJSON(c.io, out)
	}
	w := tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ACCOUNT\tPLATFORM\tSTATE\tHEALTH\tCREDENTIAL\tVERSION\tCONTRACT\tWAITING")
	for _, a := range accounts {
		waiting := "-"
		if wt, ok := waits[a.ID]; ok {
			waiting = wt.Cause
		}
		h := string(ledger.Serving)
		if hh, ok := health[a.ID]; ok && hh.State != ledger.Serving {
			h = fmt.Sprintf("%s (%s)", hh.State, hh.Cause)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", a.ID, a.Platform, accountState(a), h, dash(a.CredentialRef), a.CredentialVersion, dash(a.ContractVersion), waiting)
	}
	_ = w.Flush()
	return ExitOK
}

// accountState is what an operator set on the account: enabled, disabled, revoked.
func accountState(a ledger.Account) string {
	switch {
	case a.Disabled && a.Revoked:
		return "disabled, revoked"
	case a.Disabled:
		return "disabled"
	case a.Revoked:
		return "revoked"
	}
	return "enabled"
}
