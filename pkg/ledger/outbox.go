package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// Unpublished is a transition whose event has not been acknowledged by JetStream yet: its
// history row, the intent's account and stored traceparent ("" for none), and whether it also
// asks for dispatch (a transition into pending).
type Unpublished struct {
	Transition
	Key         identity.DeliveryKey
	Account     string
	Dispatch    bool
	TraceParent string
}

// Unpublished returns up to max transitions from the outbox, oldest first, of those that have
// been there for settled or longer by the database's clock (0: every one). It reads at READ
// COMMITTED (see inReadCommittedPipelined): every transition committed before the call is seen.
func (l *Ledger) Unpublished(ctx context.Context, max int, settled time.Duration) ([]Unpublished, error) {
	var rows []dbsqlc.OutboxPendingRow
	err := l.scanOne(ctx, "read outbox", l.outboxPlans(ctx), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OutboxPending(ctx, dbsqlc.OutboxPendingParams{SettledMs: settled.Milliseconds(), MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, err
	}
	return unpublishedRows(rows, func(r dbsqlc.OutboxPendingRow) dbsqlc.OutboxPendingRow { return r }, "read outbox")
}

// unpublishedRows converts the rows of the outbox reads, which sqlc gives a type each.
func unpublishedRows[R any](rows []R, row func(R) dbsqlc.OutboxPendingRow, what string) ([]Unpublished, error) {
	out := make([]Unpublished, 0, len(rows))
	for _, r := range rows {
		u, err := unpublishedFromRow(row(r))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Published removes transitions whose events JetStream acknowledged from the outbox and
// returns those this call removed; one already removed (by another relay, or by this one's
// other path) is not an error and is not returned.
func (l *Ledger) Published(ctx context.Context, done []Unpublished) ([]Unpublished, error) {
	if len(done) == 0 {
		return nil, nil
	}
	p := forgetParams([]forgotten{{rows: done}})
	var rows []dbsqlc.OutboxDeleteRow
	err := l.inReadCommittedPipelined(ctx, "outbox", l.outboxPlans(ctx), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OutboxDelete(ctx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("clear outbox: %w", err)
	}
	gone, err := deletedRows(rows)
	if err != nil {
		return nil, err
	}
	removed := make([]Unpublished, 0, len(rows))
	for _, u := range done {
		if gone[outboxRow{u.Key, u.Seq}] {
			removed = append(removed, u)
		}
	}
	return removed, nil
}

func unpublishedFromRow(r dbsqlc.OutboxPendingRow) (Unpublished, error) {
	key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
	if err != nil {
		return Unpublished{}, err
	}
	u := Unpublished{Key: key, Account: r.AccountID, Dispatch: r.Dispatch, TraceParent: r.Traceparent.String, Transition: Transition{
		Seq: r.Seq, From: State(r.FromState.String), To: State(r.ToState), Reason: Reason(r.Reason),
		Epoch: r.Epoch.Int64, Generation: r.Generation.Int64, Actor: r.Actor, At: r.At,
	}}
	if r.AttemptToken != nil {
		token, err := identity.AttemptTokenFromBytes(r.AttemptToken)
		if err != nil {
			return Unpublished{}, err
		}
		u.Token = &token
	}
	return u, nil
}

// OutboxLag returns how many transitions wait in the outbox and how long the oldest has waited,
// by the database's clock: how far the relays are behind.
func (l *Ledger) OutboxLag(ctx context.Context) (rows int64, oldest time.Duration, err error) {
	var r dbsqlc.OutboxLagRow
	err = l.scan(ctx, "outbox lag", func(q *dbsqlc.Queries) (err error) {
		r, err = q.OutboxLag(ctx)
		return err
	})
	return r.Rows, time.Duration(r.OldestMs) * time.Millisecond, err
}

// UnpublishedFor returns the outbox transitions of the given intents, in key and sequence
// order: what a writer publishes right after its own commit.
func (l *Ledger) UnpublishedFor(ctx context.Context, keys []identity.DeliveryKey) ([]Unpublished, error) {
	raw := rawKeys(keys)
	// READ COMMITTED (see inReadCommittedPipelined): every transition committed before the call is
	// seen, which is all the witness needs.
	var rows []dbsqlc.OutboxPendingForRow
	err := l.scanOne(ctx, fmt.Sprintf("read outbox of %d intents", len(keys)), l.outboxPlans(ctx), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OutboxPendingFor(ctx, raw)
		return err
	})
	if err != nil {
		return nil, err
	}
	return unpublishedRows(rows, func(r dbsqlc.OutboxPendingForRow) dbsqlc.OutboxPendingRow { return dbsqlc.OutboxPendingRow(r) }, "read outbox")
}

// WitnessFor returns what the dispatcher publishes as the witness of claims' authorizations:
// the outbox transitions of their intents, as UnpublishedFor, and each claim's authorized
// transition also when a relay round already published it and removed it from the outbox,
// so that JetStream's acknowledgement of it, and the stream sequence that names, is the
// dispatcher's own. In key and sequence order.
func (l *Ledger) WitnessFor(ctx context.Context, claims []Claim) ([]Unpublished, error) {
	p := dbsqlc.OutboxWitnessForParams{}
	for _, c := range claims {
		p.DeliveryKeys = append(p.DeliveryKeys, c.Key.Bytes())
		p.AttemptTokens = append(p.AttemptTokens, c.Token.Bytes())
	}
	var rows []dbsqlc.OutboxWitnessForRow
	err := l.scanOne(ctx, fmt.Sprintf("read the witness of %d authorizations", len(claims)), l.outboxPlans(ctx), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OutboxWitnessFor(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return unpublishedRows(rows, func(r dbsqlc.OutboxWitnessForRow) dbsqlc.OutboxPendingRow { return dbsqlc.OutboxPendingRow(r) }, "read the witness")
}
