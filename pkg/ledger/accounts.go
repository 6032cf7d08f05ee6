package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

var (
	// ErrAccountExists: an account with that id is already configured.
	ErrAccountExists = errors.New("ledger: account already configured")
	// ErrAccountBusy: the change would open the account's adapter otherwise (another platform
	// or settings) while an intent of the account is authorized or indeterminate. Its bytes may
	// have left under the adapter as it is, and its one lookup must ask there; the change waits
	// until those intents are settled (published, failed, or parked by a person).
	ErrAccountBusy = errors.New("ledger: the account has intents authorized or indeterminate")
)

// Account is an operator's account configuration. The credential itself never enters the
// ledger: CredentialRef says where it lives. CredentialVersion moves on whenever what the
// account's adapter is opened with changes (platform, settings, credential), so an attempt
// opened with the adapter as it was is refused at authorization.
type Account struct {
	ID                string
	Platform          string
	Settings          json.RawMessage
	CredentialRef     string
	CredentialVersion int64
	// Revoked: the credential is revoked; every authorization is refused until a rotation.
	Revoked bool
	// Disabled: an operator stopped the account; its intents wait, never authorized, until it
	// is enabled again.
	Disabled        bool
	ContractVersion string // the platform contract pinned for the account; "" pins none
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// AccountChange is what a change to an account did: the account before and after it.
type AccountChange struct {
	Before Account
	After  Account
}

// AccountUpdate names what UpdateAccount changes; a nil field keeps the account's value.
type AccountUpdate struct {
	Platform        *string
	Settings        json.RawMessage
	ContractVersion *string
}

// AddAccount configures a new account and appends it to the control history with actor and
// reason in the same statement. It refuses an id the envelope rule refuses, an empty platform,
// settings that are not a JSON object, and an id that exists (ErrAccountExists). Whether the
// platform's adapter takes the settings is not the ledger's to know: the caller checks that
// first (internal/adapters.Check).
func (l *Ledger) AddAccount(ctx context.Context, a Account, by Actor) error {
	actor, reason := by.Name, by.Reason
	if err := identity.ValidateAccount(a.ID); err != nil {
		return fmt.Errorf("add account: %w", err)
	}
	if strings.TrimSpace(actor) == "" {
		return errors.New("add account: an operator must be named")
	}
	if err := checkChange(actor, "reason", reason); err != nil {
		return fmt.Errorf("add account: %w", err)
	}
	if strings.TrimSpace(a.Platform) == "" {
		return errors.New("add account: a platform is required")
	}
	settings, err := settingsObject(a.Settings)
	if err != nil {
		return fmt.Errorf("add account: %w", err)
	}
	var rows []dbsqlc.AccountAddRow
	err = l.inTx(ctx, "account", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.AccountAdd(ctx, dbsqlc.AccountAddParams{AccountID: a.ID, Platform: a.Platform, Settings: settings,
			CredentialRef: a.CredentialRef, ContractVersion: a.ContractVersion, Actor: actor, Reason: reason})
		return err
	})
	if err != nil {
		return fmt.Errorf("add account %q: %w", a.ID, err)
	}
	if len(rows) == 0 {
		return fmt.Errorf("add account %q: %w", a.ID, ErrAccountExists)
	}
	return nil
}

// settingsObject is raw, or {} when raw is empty, refused unless it is a JSON object.
func settingsObject(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return json.RawMessage("{}"), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("settings must be a JSON object: %w", err)
	}
	return raw, nil
}

// Accounts lists every configured account.
func (l *Ledger) Accounts(ctx context.Context) ([]Account, error) {
	var rows []dbsqlc.AccountsListRow
	err := l.inTx(ctx, "account", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.AccountsList(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	out := make([]Account, len(rows))
	for i, r := range rows {
		out[i] = Account{r.AccountID, r.Platform, r.Settings, r.CredentialRef, r.CredentialVersion, r.Revoked, r.Disabled, r.ContractVersion, r.CreatedAt, r.UpdatedAt}
	}
	return out, nil
}

// Account returns one configured account, or ErrUnknownAccount.
func (l *Ledger) Account(ctx context.Context, id string) (Account, error) {
	var rows []dbsqlc.AccountGetRow
	err := l.inTx(ctx, "account", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.AccountGet(ctx, id)
		return err
	})
	switch {
	case err != nil:
		return Account{}, fmt.Errorf("account %q: %w", id, err)
	case len(rows) == 0:
		return Account{}, fmt.Errorf("account %q: %w", id, ErrUnknownAccount)
	}
	r := rows[0]
	return Account{r.AccountID, r.Platform, r.Settings, r.CredentialRef, r.CredentialVersion, r.Revoked, r.Disabled, r.ContractVersion, r.CreatedAt, r.UpdatedAt}, nil
}

// UpdateAccount changes the account's platform, settings or pinned contract, and appends the
// change to the control history with actor and reason in the same statement. A new platform or
// new settings move the credential version on (attempts opened with the adapter as it was are
// refused at authorization) and are refused while an intent of the account is authorized or
// indeterminate (ErrAccountBusy). As for AddAccount, whether the adapter takes them is the
// caller's check.
func (l *Ledger) UpdateAccount(ctx context.Context, id string, u AccountUpdate, by Actor) (AccountChange, error) {
	p := dbsqlc.AccountChangeParams{AccountID: id}
	if u.Platform != nil {
		if strings.TrimSpace(*u.Platform) == "" {
			return AccountChange{}, fmt.Errorf("update account %q: a platform is required", id)
		}
		p.Platform = pgtype.Text{String: *u.Platform, Valid: true}
	}
	if u.Settings != nil {
		settings, err := settingsObject(u.Settings)
		if err != nil {
			return AccountChange{}, fmt.Errorf("update account %q: %w", id, err)
		}
		p.Settings = settings
	}
	if u.ContractVersion != nil {
		p.ContractVersion = pgtype.Text{String: *u.ContractVersion, Valid: true}
	}
	if p.Settings == nil && !p.Platform.Valid && !p.ContractVersion.Valid {
		return AccountChange{}, fmt.Errorf("update account %q: nothing to change", id)
	}
	return l.changeAccount(ctx, "update", p, by)
}

// SetAccountDisabled disables an account (its intents wait and are never authorized: Authorize
// refuses account_disabled) or enables it again, and appends the change to the control history
// with actor and reason in the same statement. Setting the state the account is in still
// records who said so and why.
func (l *Ledger) SetAccountDisabled(ctx context.Context, id string, disabled bool, by Actor) (AccountChange, error) {
	what := "enable"
	if disabled {
		what = "disable"
	}
	return l.changeAccount(ctx, what, dbsqlc.AccountChangeParams{AccountID: id, Disabled: pgtype.Bool{Bool: disabled, Valid: true}}, by)
}

// RotateCredential records a new credential for the account (ref "" keeps the reference),
// moving its credential version on, and appends the change to the control history. Attempts
// opened with the old credential are refused at authorization; a revoked account is usable
// again.
func (l *Ledger) RotateCredential(ctx context.Context, id, ref string, by Actor) (AccountChange, error) {
	return l.changeAccount(ctx, "rotate", dbsqlc.AccountChangeParams{AccountID: id, Rotate: true,
		CredentialRef: pgtype.Text{String: ref, Valid: ref != ""}}, by)
}

// RevokeCredential stops the account's credential: every authorization is refused
// (credential_revoked) until a rotation. The change goes to the control history.
func (l *Ledger) RevokeCredential(ctx context.Context, id string, by Actor) (AccountChange, error) {
	return l.changeAccount(ctx, "revoke", dbsqlc.AccountChangeParams{AccountID: id, Revoke: true}, by)
}

func (l *Ledger) changeAccount(ctx context.Context, what string, p dbsqlc.AccountChangeParams, by Actor) (AccountChange, error) {
	actor, reason := by.Name, by.Reason
	if strings.TrimSpace(actor) == "" {
		return AccountChange{}, fmt.Errorf("%s account %q: an operator must be named", what, p.AccountID)
	}
	if err := checkChange(actor, "reason", reason); err != nil {
		return AccountChange{}, fmt.Errorf("%s account %q: %w", what, p.AccountID, err)
	}
	p.Actor, p.Reason = actor, reason
	var row dbsqlc.AccountChangeRow
	err := l.inTx(ctx, "account", func(q *dbsqlc.Queries) (err error) {
		row, err = q.AccountChange(ctx, p)
		return err
	})
	switch {
	case err != nil:
		return AccountChange{}, fmt.Errorf("%s account %q: %w", what, p.AccountID, err)
	case !row.Known:
		return AccountChange{}, fmt.Errorf("%s account %q: %w", what, p.AccountID, ErrUnknownAccount)
	case row.Busy:
		return AccountChange{}, fmt.Errorf("%s account %q: %w", what, p.AccountID, ErrAccountBusy)
	case !row.Changed || row.CreatedAt == nil || row.UpdatedAt == nil:
		return AccountChange{}, fmt.Errorf("%s account %q: nothing was changed", what, p.AccountID)
	}
	after := Account{ID: row.AccountID.String, Platform: row.Platform.String, Settings: row.Settings, CredentialRef: row.CredentialRef.String,
		CredentialVersion: row.CredentialVersion.Int64, Revoked: row.Revoked.Bool, Disabled: row.Disabled.Bool,
		ContractVersion: row.ContractVersion.String, CreatedAt: *row.CreatedAt, UpdatedAt: *row.UpdatedAt}
	before := Account{ID: after.ID, Platform: row.BeforePlatform.String, Settings: row.BeforeSettings, CredentialRef: row.BeforeCredentialRef.String,
		CredentialVersion: row.BeforeCredentialVersion.Int64, Revoked: row.BeforeRevoked.Bool, Disabled: row.BeforeDisabled.Bool,
		ContractVersion: row.BeforeContractVersion.String, CreatedAt: after.CreatedAt, UpdatedAt: *row.BeforeUpdatedAt}
	return AccountChange{Before: before, After: after}, nil
}

// Hold is a gate that holds every intent of an account now: the reason Authorize would give
// (kill_switch, account_disabled or credential_revoked, in the order it checks them) and the
// operator change that set it. For a kill switch Scope is GlobalScope or the account. By, Why
// and Since are empty when the ledger holds no record of the change (a credential revoked
// before account changes were recorded).
type Hold struct {
	Reason Reason
	Scope  string
	By     string
	Why    string
	Since  *time.Time
}

// Holds returns what holds each of accounts (every account when accounts is empty) that a gate
// holds now; an account no gate holds is absent.
func (l *Ledger) Holds(ctx context.Context, accounts []string) (map[string]Hold, error) {
	if accounts == nil {
		accounts = []string{}
	}
	var rows []dbsqlc.AccountHoldsRow
	err := l.inTx(ctx, "account", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.AccountHolds(ctx, accounts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("account holds: %w", err)
	}
	out := make(map[string]Hold, len(rows))
	for _, r := range rows {
		var h Hold
		switch {
		case r.OwnSwitchAt != nil:
			h = Hold{ReasonKillSwitch, r.AccountID, r.OwnSwitchActor.String, r.OwnSwitchReason.String, r.OwnSwitchAt}
		case r.GlobalSwitchAt != nil:
			h = Hold{ReasonKillSwitch, GlobalScope, r.GlobalSwitchActor.String, r.GlobalSwitchReason.String, r.GlobalSwitchAt}
		case r.Disabled:
			h = Hold{ReasonAccountDisabled, r.AccountID, r.DisabledActor.String, r.DisabledReason.String, r.DisabledAt}
		case r.Revoked:
			h = Hold{ReasonCredentialRevoked, r.AccountID, r.RevokedActor.String, r.RevokedReason.String, r.RevokedAt}
		default:
			continue
		}
		out[r.AccountID] = h
	}
	return out, nil
}

// PendingCounts returns how many intents of each of accounts are pending; an account with none
// is absent.
func (l *Ledger) PendingCounts(ctx context.Context, accounts []string) (map[string]int64, error) {
	out := map[string]int64{}
	if len(accounts) == 0 {
		return out, nil
	}
	var rows []dbsqlc.AccountsPendingRow
	err := l.inTx(ctx, "account", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.AccountsPending(ctx, accounts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pending intents of %d accounts: %w", len(accounts), err)
	}
	for _, r := range rows {
		out[r.AccountID] = r.Pending
	}
	return out, nil
}
