package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/atmost/atmost/pkg/ledger"
)

const accountsUsage = `Usage:
  atmost accounts add ACCOUNT --platform P [--settings JSON] [--credential-ref REF] [--contract-version V]
  atmost accounts ls [--json]
  atmost accounts rotate ACCOUNT [--credential-ref REF]   a new credential: attempts opened with the old one are refused
  atmost accounts revoke ACCOUNT                          every authorization refused until the next rotate

The credential itself never enters the ledger: --credential-ref says where it lives.
`

func runAccounts(ctx context.Context, io IO, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(io.Stderr, accountsUsage)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("atmost accounts "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Stderr)
	fs.Usage = func() { fmt.Fprint(io.Stderr, accountsUsage, "\nFlags:\n"); fs.PrintDefaults() }
	databaseURL := fs.String("database-url", setting(io.Env, "ATMOST_DATABASE_URL", DefaultDatabaseURL), "the ledger database (env ATMOST_DATABASE_URL)")
	platform := fs.String("platform", "", "add: the platform adapter that serves the account (sim, webhook, bluesky, ...)")
	settings := fs.String("settings", "{}", "add: the adapter's settings for the account, a JSON object")
	ref := fs.String("credential-ref", "", "add, rotate: where the credential lives (env:NAME, a vault path, ...)")
	contract := fs.String("contract-version", "", "add: the platform contract version to pin (empty pins none)")
	asJSON := fs.Bool("json", false, "ls: print JSON")

	// The account id comes first, flags after it.
	var account string
	if sub != "ls" && len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		account, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	if fs.NArg() > 0 || (sub != "ls" && account == "") {
		fs.Usage()
		return ExitUsage
	}
	fail := func(err error) int { fmt.Fprintf(io.Stderr, "atmost accounts %s: %v\n", sub, err); return ExitError }

	l, closeLedger, err := openLedger(ctx, *databaseURL)
	if err != nil {
		return fail(err)
	}
	defer closeLedger()
	switch sub {
	case "add":
		err := l.AddAccount(ctx, ledger.Account{ID: account, Platform: *platform, Settings: json.RawMessage(*settings),
			CredentialRef: *ref, ContractVersion: *contract})
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(io.Stdout, "account %q added (platform %s, credential version 1)\n", account, *platform)
	case "ls":
		accounts, err := l.Accounts(ctx)
		if err != nil {
			return fail(err)
		}
		if *asJSON {
			if accounts == nil {
				accounts = []ledger.Account{}
			}
			return writeJSON(io, accounts)
		}
		w := tabwriter.NewWriter(io.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ACCOUNT\tPLATFORM\tCREDENTIAL\tVERSION\tREVOKED\tCONTRACT")
		for _, a := range accounts {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%t\t%s\n", a.ID, a.Platform, a.CredentialRef, a.CredentialVersion, a.Revoked, a.ContractVersion)
		}
		_ = w.Flush()
	case "rotate":
		v, err := l.RotateCredential(ctx, account, *ref)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(io.Stdout, "account %q: credential version %d\n", account, v)
	case "revoke":
		v, err := l.RevokeCredential(ctx, account)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(io.Stdout, "account %q: revoked (credential version %d); rotate to use it again\n", account, v)
	default:
		fmt.Fprintf(io.Stderr, "atmost accounts: unknown command %q\n\n%s", sub, accountsUsage)
		return ExitUsage
	}
	return ExitOK
}
