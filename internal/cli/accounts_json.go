package cli

import (
	"encoding/json"
	"time"

	"github.com/atmost/atmost/pkg/ledger"
)

// accountJSON is an account as the accounts commands print it with --json: snake_case keys, as
// every command's JSON, where ledger.Account (whose fields have no JSON names) would print
// PascalCase. Account is the account's id, named as in every other JSON of atmost; Settings
// are the adapter's settings as stored.
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

// toAccountJSON is a as accounts ls --json and accounts show --json print it (a test checks it
// carries every field of ledger.Account).
func toAccountJSON(a ledger.Account) accountJSON {
	return accountJSON{Account: a.ID, Platform: a.Platform, Settings: rawJSON(a.Settings), CredentialRef: a.CredentialRef,
		CredentialVersion: a.CredentialVersion, Revoked: a.Revoked, Disabled: a.Disabled, ContractVersion: a.ContractVersion, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
}

// healthJSON is an account's health as accounts ls --json and accounts show --json print it:
// since and next_probe null when there is none.
type healthJSON struct {
	State     string     `json:"state"`
	Cause     string     `json:"cause"`
	Since     *time.Time `json:"since"`
	NextProbe *time.Time `json:"next_probe"`
}

func toHealthJSON(h ledger.Health) healthJSON {
	out := healthJSON{State: string(h.State), Cause: h.Cause}
	if out.State == "" {
		out.State = string(ledger.Serving)
	}
	if !h.Since.IsZero() {
		out.Since = &h.Since
	}
	if !h.NextProbe.IsZero() {
		out.NextProbe = &h.NextProbe
	}
	return out
}
