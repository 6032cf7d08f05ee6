package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// OperatorRole is what a console operator may do.
type OperatorRole string

const (
	// RoleViewer sees every page of the console and changes nothing.
	RoleViewer OperatorRole = "viewer"
	// RoleOperator also makes the console's changes (park, resolve, retry, switches, policies,
	// replays).
	RoleOperator OperatorRole = "operator"
)

// BootstrapOperator is the name the console gives whoever logs in with its shared token
// (ATMOST_CONSOLE_TOKEN): no operator of the ledger may take it, so a change recorded as
// console:bootstrap always came from that token.
const BootstrapOperator = "bootstrap"

// OperatorKind is the control history's kind for adding and revoking an operator.
const OperatorKind = "operator"

// MaxOperatorName bounds an operator's name.
const MaxOperatorName = 64

// operatorName is the shape of an operator's name: letters, digits and . _ @ -, so that its
// actor console:NAME reads the same everywhere and never as a process's <role>/<instance>.
var operatorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]*$`)

var (
	// ErrOperatorExists: an operator of that name exists or existed (a revoked name is never
	// handed out again, so its history names one person).
	ErrOperatorExists = errors.New("ledger: operator already exists")
	// ErrUnknownOperator: no operator of that name, or no operator that is not revoked holds
	// that token.
	ErrUnknownOperator = errors.New("ledger: unknown operator")
	// ErrOperatorRevoked: the operator is revoked already.
	ErrOperatorRevoked = errors.New("ledger: operator already revoked")
)

// Operator is a console operator. Its token is never read back: the ledger holds its hash.
type Operator struct {
	Name      string
	Role      OperatorRole
	CreatedAt time.Time
	RevokedAt *time.Time // nil while the operator's token works
}

// CheckOperatorName refuses a name AddOperator refuses.
func CheckOperatorName(name string) error {
	switch {
	case name == "" || len(name) > MaxOperatorName || !operatorName.MatchString(name):
		return fmt.Errorf("operator name %q: 1 to %d letters, digits, '.', '_', '@' or '-', starting with a letter or a digit", name, MaxOperatorName)
	case strings.EqualFold(name, BootstrapOperator):
		return fmt.Errorf("operator name %q is the console's shared token's: choose another", name)
	}
	return nil
}

// tokenHash is what the ledger keeps of an operator's token. A plain SHA-256, not a slow
// password hash: the token is 32 bytes from crypto/rand, so nobody can guess one from its hash
// however fast the hash is, and a fast hash lets every console request look its token up
// (and see a revocation) with an indexed equality.
func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// operatorTokenPrefix marks an operator's token, so that one found in a log or a file says
// what it opens.
const operatorTokenPrefix = "atmost_op_"

// AddOperator adds a console operator with role and returns its token, which exists nowhere
// else: the caller shows it once. The addition is written to the control history with actor
// and reason in the same statement. It refuses a bad name (CheckOperatorName), an unknown
// role and a name that exists or existed (ErrOperatorExists).
func (l *Ledger) AddOperator(ctx context.Context, name string, role OperatorRole, by Actor) (string, error) {
	actor, reason := by.Name, by.Reason
	if err := CheckOperatorName(name); err != nil {
		return "", fmt.Errorf("add operator: %w", err)
	}
	if role != RoleViewer && role != RoleOperator {
		return "", fmt.Errorf("add operator %q: role %q is neither %s nor %s", name, role, RoleViewer, RoleOperator)
	}
	if strings.TrimSpace(actor) == "" {
		return "", errors.New("add operator: who adds it must be named")
	}
	if err := checkChange(actor, "reason", reason); err != nil {
		return "", fmt.Errorf("add operator: %w", err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("add operator: %w", err)
	}
	token := operatorTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	var rows []dbsqlc.OperatorAddRow
	err := l.inTx(ctx, "operator", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OperatorAdd(ctx, dbsqlc.OperatorAddParams{Name: name, Role: string(role), TokenSha256: tokenHash(token), Actor: actor, Reason: reason})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("add operator %q: %w", name, err)
	}
	if len(rows) == 0 {
		return "", fmt.Errorf("add operator %q: %w", name, ErrOperatorExists)
	}
	return token, nil
}

// RevokeOperator revokes a console operator: its token stops working and the console ends its
// sessions on their next request. It is written to the control history with actor and reason.
func (l *Ledger) RevokeOperator(ctx context.Context, name string, by Actor) (Operator, error) {
	actor, reason := by.Name, by.Reason
	if strings.TrimSpace(actor) == "" {
		return Operator{}, errors.New("revoke operator: who revokes it must be named")
	}
	if strings.TrimSpace(reason) == "" {
		return Operator{}, errors.New("revoke operator: a reason is required")
	}
	if err := checkChange(actor, "reason", reason); err != nil {
		return Operator{}, fmt.Errorf("revoke operator: %w", err)
	}
	var rows []dbsqlc.OperatorRevokeRow
	var known []dbsqlc.OperatorGetRow
	err := l.inTx(ctx, "operator", func(q *dbsqlc.Queries) (err error) {
		if rows, err = q.OperatorRevoke(ctx, dbsqlc.OperatorRevokeParams{Name: name, Actor: actor, Reason: reason}); err != nil || len(rows) > 0 {
			return err
		}
		known, err = q.OperatorGet(ctx, name)
		return err
	})
	switch {
	case err != nil:
		return Operator{}, fmt.Errorf("revoke operator %q: %w", name, err)
	case len(rows) > 0:
		r := rows[0]
		return Operator{r.Name, OperatorRole(r.Role), r.CreatedAt, r.RevokedAt}, nil
	case len(known) > 0:
		return Operator{}, fmt.Errorf("revoke operator %q: %w", name, ErrOperatorRevoked)
	}
	return Operator{}, fmt.Errorf("revoke operator %q: %w", name, ErrUnknownOperator)
}

// Operators lists every console operator, revoked ones too.
func (l *Ledger) Operators(ctx context.Context) ([]Operator, error) {
	var rows []dbsqlc.OperatorsListRow
	err := l.snapshot(ctx, "operator", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OperatorsList(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list operators: %w", err)
	}
	out := make([]Operator, len(rows))
	for i, r := range rows {
		out[i] = Operator{r.Name, OperatorRole(r.Role), r.CreatedAt, r.RevokedAt}
	}
	return out, nil
}

// OperatorByToken is the operator token belongs to, or ErrUnknownOperator when none that is
// not revoked does. The console asks it on every request of a session, so that a revocation
// takes effect at once.
func (l *Ledger) OperatorByToken(ctx context.Context, token string) (Operator, error) {
	if !strings.HasPrefix(token, operatorTokenPrefix) {
		return Operator{}, ErrUnknownOperator
	}
	var rows []dbsqlc.OperatorByTokenRow
	err := l.snapshot(ctx, "operator", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OperatorByToken(ctx, tokenHash(token))
		return err
	})
	if err != nil {
		return Operator{}, fmt.Errorf("operator by token: %w", err)
	}
	if len(rows) == 0 {
		return Operator{}, ErrUnknownOperator
	}
	return Operator{Name: rows[0].Name, Role: OperatorRole(rows[0].Role)}, nil
}

// Operator returns one console operator, revoked or not, or ErrUnknownOperator.
func (l *Ledger) Operator(ctx context.Context, name string) (Operator, error) {
	var rows []dbsqlc.OperatorGetRow
	err := l.snapshot(ctx, "operator", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OperatorGet(ctx, name)
		return err
	})
	if err != nil {
		return Operator{}, fmt.Errorf("operator %q: %w", name, err)
	}
	if len(rows) == 0 {
		return Operator{}, fmt.Errorf("operator %q: %w", name, ErrUnknownOperator)
	}
	r := rows[0]
	return Operator{r.Name, OperatorRole(r.Role), r.CreatedAt, r.RevokedAt}, nil
}
