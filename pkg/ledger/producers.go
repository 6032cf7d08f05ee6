package ledger

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// ProducerKind is the control history's kind for adding and revoking a producer of ingest's
// HTTP API.
const ProducerKind = "producer"

// MaxProducerAccounts bounds how many accounts one producer token acts for.
const MaxProducerAccounts = 64

// ProducerTokenPrefix marks a producer's token, so that one found in a log or a file says what
// it opens (and an operator's token is never taken for one).
const ProducerTokenPrefix = "atmost_pr_"

var (
	// ErrProducerExists: a producer of that name exists or existed (a revoked name is never
	// handed out again, so its history names one producer).
	ErrProducerExists = errors.New("ledger: producer already exists")
	// ErrUnknownProducer: no producer of that name, or no producer that is not revoked holds
	// that token.
	ErrUnknownProducer = errors.New("ledger: unknown producer")
	// ErrProducerRevoked: the producer is revoked already.
	ErrProducerRevoked = errors.New("ledger: producer already revoked")
)

// Producer is a producer of ingest's HTTP API: its token acts for Accounts and no other. Its
// token is never read back: the ledger holds its hash.
type Producer struct {
	Name      string
	Accounts  []string
	CreatedAt time.Time
	RevokedAt *time.Time // nil while the producer's token works
}

// ActsFor reports whether the producer's token may act for account: publish its intents, read
// their outcomes and stream its events.
func (p Producer) ActsFor(account string) bool { return slices.Contains(p.Accounts, account) }

// CheckProducerName refuses a name AddProducer refuses: the shape of an operator's name.
func CheckProducerName(name string) error {
	if name == "" || len(name) > MaxOperatorName || !operatorName.MatchString(name) {
		return fmt.Errorf("producer name %q: 1 to %d letters, digits, '.', '_', '@' or '-', starting with a letter or a digit", name, MaxOperatorName)
	}
	return nil
}

// CheckProducerAccounts refuses what AddProducer refuses of its accounts: an empty list, too
// many, a repeated one and one that is no valid account id (identity.ValidateAccount). An
// account need not be configured yet: an intent for an account the ledger does not know is
// refused unknown_account, as on NATS.
func CheckProducerAccounts(accounts []string) error {
	switch {
	case len(accounts) == 0:
		return errors.New("a producer acts for at least one account")
	case len(accounts) > MaxProducerAccounts:
		return fmt.Errorf("%d accounts: a producer acts for at most %d", len(accounts), MaxProducerAccounts)
	}
	seen := map[string]bool{}
	for _, a := range accounts {
		if err := identity.ValidateAccount(a); err != nil {
			return fmt.Errorf("account %q: %w", a, err)
		}
		if seen[a] {
			return fmt.Errorf("account %q is named twice", a)
		}
		seen[a] = true
	}
	return nil
}

// AddProducer adds a producer bound to accounts and returns its token, which exists nowhere
// else: the caller shows it once. The addition is written to the control history with the actor
// and reason in the same statement. It refuses a bad name (CheckProducerName), bad accounts and
// a name that exists or existed (ErrProducerExists).
func (l *Ledger) AddProducer(ctx context.Context, name string, accounts []string, by Actor) (string, error) {
	actor, reason := by.Name, by.Reason
	if err := CheckProducerName(name); err != nil {
		return "", fmt.Errorf("add producer: %w", err)
	}
	if err := CheckProducerAccounts(accounts); err != nil {
		return "", fmt.Errorf("add producer %q: %w", name, err)
	}
	if strings.TrimSpace(actor) == "" {
		return "", errors.New("add producer: who adds it must be named")
	}
	if err := checkChange(actor, "reason", reason); err != nil {
		return "", fmt.Errorf("add producer: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("add producer: %w", err)
	}
	token := ProducerTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	var rows []dbsqlc.ProducerAddRow
	err := l.inTx(ctx, "producer", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.ProducerAdd(ctx, dbsqlc.ProducerAddParams{Name: name, TokenSha256: tokenHash(token), Accounts: accounts, Actor: actor, Reason: reason})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("add producer %q: %w", name, err)
	}
	if len(rows) == 0 {
		return "", fmt.Errorf("add producer %q: %w", name, ErrProducerExists)
	}
	return token, nil
}

// RevokeProducer revokes a producer: its token is refused from its next request on, and its
// open event streams end. It is written to the control history with the actor and reason.
func (l *Ledger) RevokeProducer(ctx context.Context, name string, by Actor) (Producer, error) {
	actor, reason := by.Name, by.Reason
	if strings.TrimSpace(actor) == "" {
		return Producer{}, errors.New("revoke producer: who revokes it must be named")
	}
	if strings.TrimSpace(reason) == "" {
		return Producer{}, errors.New("revoke producer: a reason is required")
	}
	if err := checkChange(actor, "reason", reason); err != nil {
		return Producer{}, fmt.Errorf("revoke producer: %w", err)
	}
	var rows []dbsqlc.ProducerRevokeRow
	var known []dbsqlc.ProducerGetRow
	err := l.inTx(ctx, "producer", func(q *dbsqlc.Queries) (err error) {
		if rows, err = q.ProducerRevoke(ctx, dbsqlc.ProducerRevokeParams{Name: name, Actor: actor, Reason: reason}); err != nil || len(rows) > 0 {
			return err
		}
		known, err = q.ProducerGet(ctx, name)
		return err
	})
	switch {
	case err != nil:
		return Producer{}, fmt.Errorf("revoke producer %q: %w", name, err)
	case len(rows) > 0:
		r := rows[0]
		return Producer{r.Name, r.Accounts, r.CreatedAt, r.RevokedAt}, nil
	case len(known) > 0:
		return Producer{}, fmt.Errorf("revoke producer %q: %w", name, ErrProducerRevoked)
	}
	return Producer{}, fmt.Errorf("revoke producer %q: %w", name, ErrUnknownProducer)
}

// Producers lists every producer, revoked ones too.
func (l *Ledger) Producers(ctx context.Context) ([]Producer, error) {
	var rows []dbsqlc.ProducersListRow
	err := l.snapshot(ctx, "producer", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.ProducersList(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list producers: %w", err)
	}
	out := make([]Producer, len(rows))
	for i, r := range rows {
		out[i] = Producer{r.Name, r.Accounts, r.CreatedAt, r.RevokedAt}
	}
	return out, nil
}

// ProducerByToken is the producer token belongs to, or ErrUnknownProducer when none that is
// not revoked does. The HTTP API asks it on every request, so that a revocation takes effect
// at once. The token is looked up by its SHA-256, and the stored hash is compared again in
// constant time: how long the answer takes says nothing about how much of a guess was right.
func (l *Ledger) ProducerByToken(ctx context.Context, token string) (Producer, error) {
	if !strings.HasPrefix(token, ProducerTokenPrefix) {
		return Producer{}, ErrUnknownProducer
	}
	sum := tokenHash(token)
	var rows []dbsqlc.ProducerByTokenRow
	err := l.snapshot(ctx, "producer", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.ProducerByToken(ctx, sum)
		return err
	})
	if err != nil {
		return Producer{}, fmt.Errorf("producer by token: %w", err)
	}
	if len(rows) == 0 || subtle.ConstantTimeCompare(rows[0].TokenSha256, sum) != 1 {
		return Producer{}, ErrUnknownProducer
	}
	return Producer{Name: rows[0].Name, Accounts: rows[0].Accounts}, nil
}

// Producer returns one producer, revoked or not, or ErrUnknownProducer.
func (l *Ledger) Producer(ctx context.Context, name string) (Producer, error) {
	var rows []dbsqlc.ProducerGetRow
	err := l.snapshot(ctx, "producer", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.ProducerGet(ctx, name)
		return err
	})
	if err != nil {
		return Producer{}, fmt.Errorf("producer %q: %w", name, err)
	}
	if len(rows) == 0 {
		return Producer{}, fmt.Errorf("producer %q: %w", name, ErrUnknownProducer)
	}
	r := rows[0]
	return Producer{r.Name, r.Accounts, r.CreatedAt, r.RevokedAt}, nil
}
