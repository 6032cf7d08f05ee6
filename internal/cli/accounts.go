package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/pkg/ledger"
)

const accountsUsage = `Usage:
  atmost accounts add ACCOUNT --platform P [--settings JSON] [--credential-ref REF] [--contract-version V] --reason TEXT [--operator NAME]
  atmost accounts ls [--json]
  atmost accounts show ACCOUNT [--json]
  atmost accounts update ACCOUNT [--platform P] [--settings JSON] [--contract-version V] --reason TEXT [--operator NAME]
  atmost accounts disable ACCOUNT --reason TEXT [--operator NAME]   its intents wait, never authorized, until enable
  atmost accounts enable ACCOUNT --reason TEXT [--operator NAME]
  atmost accounts rotate ACCOUNT [--credential-ref REF] --reason TEXT [--operator NAME]   attempts opened with the old credential are refused
  atmost accounts revoke ACCOUNT --reason TEXT [--operator NAME]    every authorization refused until the next rotate

add, update and rotate open the platform's adapter as the roles will, sending nothing, and
refuse what it refuses (an unknown platform, a setting it does not know or needs) with its
own message; nothing is stored then. The credential itself never enters the ledger:
--credential-ref says where it lives (env:NAME or file:/path). Where it can be read here it
is checked too, never printed; where it cannot, the command says so and the roles must read
it. update refuses new platform or settings while an intent of the account is authorized or
indeterminate. Every change is written to the control history (atmost controls log).
`

// accountJSON is an account as the accounts commands print it.
type accountJSON struct {
	Account           string          `json:"account"`
	Platform          string          `json:"platform"`
	Settings          json.RawMessage `json:"settings"`
	CredentialRef     string          `json:"credential_ref"`
	CredentialVersion int64           `json:"credential_version"`
	Revoked           bool            `json:"revoked"`
	Disabled          bool            `json:"disabled"`
	ContractVersion   string          `json:"contract_version"`
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
}

func toAccountJSON(a ledger.Account) accountJSON {
	return accountJSON{a.ID, a.Platform, rawJSON(a.Settings), a.CredentialRef, a.CredentialVersion, a.Revoked, a.Disabled,
		a.ContractVersion, a.CreatedAt, a.UpdatedAt}
}

func runAccounts(ctx context.Context, io IO, args []string) int {
	var platformName, settings, ref, contract *string
	change := []string{"operator", "reason"}
	c, sub, pos, code, done := parseGroup(io, "accounts", accountsUsage, args,
		map[string][]string{
			"add":     append([]string{"platform", "settings", "credential-ref", "contract-version"}, change...),
			"ls":      nil,
			"show":    nil,
			"update":  append([]string{"platform", "settings", "contract-version"}, change...),
			"disable": change,
			"enable":  change,
			"rotate":  append([]string{"credential-ref"}, change...),
			"revoke":  change,
		},
		map[string][]string{"add": {"ACCOUNT"}, "show": {"ACCOUNT"}, "update": {"ACCOUNT"}, "disable": {"ACCOUNT"},
			"enable": {"ACCOUNT"}, "rotate": {"ACCOUNT"}, "revoke": {"ACCOUNT"}},
		func(fs *flag.FlagSet) {
			platformName = fs.String("platform", "", "add, update: the platform adapter that serves the account ("+platformList()+")")
			settings = fs.String("settings", "", "add, update: the adapter's settings for the account, a JSON object (add: default {})")
			ref = fs.String("credential-ref", "", "add, rotate: where the credential lives (env:NAME or file:/path; rotate: default the same)")
			contract = fs.String("contract-version", "", "add, update: the platform contract version to pin (empty pins none)")
		})
	if done {
		return code
	}
	if sub == "ls" || sub == "show" {
		return showAccounts(ctx, c, pos)
	}
	account := pos[0]
	operator, reason, code := c.change()
	if code != ExitOK {
		return code
	}
	l, closeLedger, err := openLedger(ctx, *c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()

	var ch ledger.AccountChange
	switch sub {
	case "add":
		a := ledger.Account{ID: account, Platform: *platformName, Settings: json.RawMessage(*settings), CredentialRef: *ref, ContractVersion: *contract}
		if a.Platform == "" {
			return c.usageError("--platform is required: name the adapter (%s)", platformList())
		}
		if !c.checkAccount(a) {
			return ExitError
		}
		if err := l.AddAccount(ctx, a, operator, reason); err != nil {
			return c.fail(err)
		}
		if ch.After, err = l.Account(ctx, account); err != nil {
			return c.fail(err)
		}
	case "update":
		var u ledger.AccountUpdate
		if c.given("platform") {
			u.Platform = platformName
		}
		if c.given("settings") {
			u.Settings = json.RawMessage(*settings)
		}
		if c.given("contract-version") {
			u.ContractVersion = contract
		}
		if u.Platform == nil && u.Settings == nil && u.ContractVersion == nil {
			return c.usageError("give what to change: --platform, --settings or --contract-version")
		}
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
		ch, err = l.UpdateAccount(ctx, account, u, operator, reason)
	case "disable", "enable":
		ch, err = l.SetAccountDisabled(ctx, account, sub == "disable", operator, reason)
	case "rotate":
		var a ledger.Account
		if a, err = l.Account(ctx, account); err != nil {
			return c.fail(err)
		}
		if *ref != "" {
			a.CredentialRef = *ref
		}
		if !c.checkAccount(a) {
			return ExitError
		}
		ch, err = l.RotateCredential(ctx, account, *ref, operator, reason)
	case "revoke":
		ch, err = l.RevokeCredential(ctx, account, operator, reason)
	}
	if err != nil {
		if errors.Is(err, ledger.ErrAccountBusy) {
			fmt.Fprintf(c.io.Stderr, "%s: %v: wait until they are published or failed, or park them (atmost intents ls --account %s --state indeterminate)\n",
				c.name, err, shellQuote(account))
			return ExitError
		}
		return c.fail(err)
	}
	if *c.asJSON {
		out := struct {
			Before *accountJSON `json:"before"`
			After  accountJSON  `json:"after"`
		}{After: toAccountJSON(ch.After)}
		if sub != "add" {
			b := toAccountJSON(ch.Before)
			out.Before = &b
		}
		return writeJSON(io, out)
	}
	a := ch.After
	switch sub {
	case "add":
		fmt.Fprintf(io.Stdout, "account %s added (platform %s, credential version %d) by %s: %s\n", a.ID, a.Platform, a.CredentialVersion, operator, reason)
	case "update":
		fmt.Fprintf(io.Stdout, "account %s updated (%s) by %s: %s\n", a.ID, describeFields(accountFields(ch.Before), accountFields(a)), operator, reason)
	case "disable", "enable":
		fmt.Fprintf(io.Stdout, "account %s: %s -> %s by %s: %s\n", a.ID, enabledName(ch.Before.Disabled), enabledName(a.Disabled), operator, reason)
	case "rotate":
		fmt.Fprintf(io.Stdout, "account %s: credential %s, version %d by %s: %s\n", a.ID, dash(a.CredentialRef), a.CredentialVersion, operator, reason)
	case "revoke":
		fmt.Fprintf(io.Stdout, "account %s: revoked (credential version %d) by %s: %s; rotate to use it again\n", a.ID, a.CredentialVersion, operator, reason)
	}
	return ExitOK
}

// checkAccount opens a's adapter as the roles will, sending nothing (adapters.CheckAccount),
// and reports a refusal; a credential that cannot be read here is said on standard error, and
// is no refusal.
func (c controlLine) checkAccount(a ledger.Account) bool {
	check, err := adapters.CheckAccount(adapters.Builtin(), a, c.io.Env)
	if err != nil {
		fmt.Fprintf(c.io.Stderr, "%s: %v\nnothing was stored\n", c.name, err)
		return false
	}
	if check.Credential == adapters.CredentialUnread {
		fmt.Fprintf(c.io.Stderr, "%s: note: credential %s: %s; the roles that serve the account must be able to read it\n", c.name, a.CredentialRef, check.Unread)
	}
	return true
}

func platformList() string { return strings.Join(adapters.Builtin().Names(), ", ") }

func enabledName(disabled bool) string {
	if disabled {
		return "disabled"
	}
	return "enabled"
}

// accountFields is an account's settable columns as the control history holds them, for
// describeFields.
func accountFields(a ledger.Account) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"platform": a.Platform, "settings": rawJSON(a.Settings), "credential_ref": a.CredentialRef,
		"credential_version": a.CredentialVersion, "revoked": a.Revoked, "disabled": a.Disabled, "contract_version": a.ContractVersion})
	return b
}

// showAccounts is accounts ls (pos empty) and accounts show ACCOUNT.
func showAccounts(ctx context.Context, c controlLine, pos []string) int {
	l, closeLedger, err := openLedger(ctx, *c.databaseURL)
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
	waits, err := adapters.Waits(ctx, l, adapters.Builtin(), c.io.Env, accounts)
	if err != nil {
		return c.fail(err)
	}
	if len(pos) == 0 {
		return listAccounts(c, accounts, waits)
	}
	a := accounts[0]
	pending, err := l.PendingCounts(ctx, []string{a.ID})
	if err != nil {
		return c.fail(err)
	}
	check, checkErr := adapters.CheckAccount(adapters.Builtin(), a, c.io.Env)
	if *c.asJSON {
		out := struct {
			accountJSON
			Pending int64   `json:"pending_intents"`
			Waiting *string `json:"waiting"`
			Cause   *string `json:"waiting_cause"`
			Adapter string  `json:"adapter"`
			// Credential is what this command could see of the credential (none, read, unread).
			Credential adapters.CredentialCheck `json:"credential_check"`
		}{accountJSON: toAccountJSON(a), Pending: pending[a.ID], Adapter: "opens", Credential: check.Credential}
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

func listAccounts(c controlLine, accounts []ledger.Account, waits map[string]adapters.Wait) int {
	if *c.asJSON {
		out := make([]accountJSON, len(accounts))
		for i, a := range accounts {
			out[i] = toAccountJSON(a)
		}
		return writeJSON(c.io, out)
	}
	w := tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ACCOUNT\tPLATFORM\tSTATE\tCREDENTIAL\tVERSION\tCONTRACT\tWAITING")
	for _, a := range accounts {
		waiting := "-"
		if wt, ok := waits[a.ID]; ok {
			waiting = wt.Cause
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", a.ID, a.Platform, accountState(a), dash(a.CredentialRef), a.CredentialVersion, dash(a.ContractVersion), waiting)
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
