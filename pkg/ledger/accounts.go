package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// ErrAccountExists: an account with that id is already configured.
var ErrAccountExists = errors.New("ledger: account already configured")

// Account is an operator's account configuration. The credential itself never enters the
// ledger: CredentialRef says where it lives, CredentialVersion changes when it rotates.
type Account struct {
	ID                string
	Platform          string
	Settings          json.RawMessage
	CredentialRef     string
	CredentialVersion int64
	Revoked           bool
	ContractVersion   string // the platform contract pinned for the account; "" pins none
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// AddAccount configures a new account, refusing an id the envelope rule refuses and one that
// exists (ErrAccountExists).
func (l *Ledger) AddAccount(ctx context.Context, a Account) error {
	if err := identity.ValidateAccount(a.ID); err != nil {
		return fmt.Errorf("add account: %w", err)
	}
	if strings.TrimSpace(a.Platform) == "" {
		return errors.New("add account: a platform is required")
	}
	settings := a.Settings
	if len(settings) == 0 {
		settings = json.RawMessage("{}")
	}
	var obj map[string]any
	if err := json.Unmarshal(settings, &obj); err != nil {
		return fmt.Errorf("add account: settings must be a JSON object: %w", err)
	}
	var n int64
	err := l.inTx(ctx, "account", func(q *dbsqlc.Queries) (err error) {
		n, err = q.AccountInsert(ctx, dbsqlc.AccountInsertParams{AccountID: a.ID, Platform: a.Platform, Settings: settings,
			CredentialRef: a.CredentialRef, ContractVersion: a.ContractVersion})
		return err
	})
	if err != nil {
		return fmt.Errorf("add account %q: %w", a.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("add account %q: %w", a.ID, ErrAccountExists)
	}
	return nil
}

// Accounts lists every configured account.
func (l *Ledger) Accounts(ctx context.Context) ([]Account, error) {
	var rows []dbsqlc.Account
	err := l.inTx(ctx, "account", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.AccountsList(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	out := make([]Account, len(rows))
	for i, r := range rows {
		out[i] = Account{r.AccountID, r.Platform, r.Settings, r.CredentialRef, r.CredentialVersion, r.Revoked, r.ContractVersion, r.CreatedAt, r.UpdatedAt}
	}
	return out, nil
}

// RotateCredential records a new credential for the account (ref "" keeps the reference) and
// returns the new credential version. Attempts opened with the old one are refused at
// authorization; a revoked account is usable again.
func (l *Ledger) RotateCredential(ctx context.Context, account, ref string) (int64, error) {
	var v int64
	err := l.inTx(ctx, "account", func(q *dbsqlc.Queries) (err error) {
		v, err = q.AccountRotate(ctx, dbsqlc.AccountRotateParams{AccountID: account, CredentialRef: pgtype.Text{String: ref, Valid: ref != ""}})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("rotate %q: %w", account, ErrUnknownAccount)
	}
	return v, err
}

// RevokeCredential stops the account: every authorization is refused until a rotation.
func (l *Ledger) RevokeCredential(ctx context.Context, account string) (int64, error) {
	var v int64
	err := l.inTx(ctx, "account", func(q *dbsqlc.Queries) (err error) {
		v, err = q.AccountRevoke(ctx, account)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("revoke %q: %w", account, ErrUnknownAccount)
	}
	return v, err
}
