package ledger

import (
	"context"

	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// Orphans counts, per table, the rows that point at an intent (or, for the outbox, a history
// row) that does not exist. The ledger writes such rows only together with the row they
// point at (in the statement that changes the intent, or, restoring, in the same transaction
// right after it) and the application role may delete neither intents, attempts nor history,
// so every count is zero; migrations 39 to 41 dropped the foreign keys that enforced it row by
// row, and this is the check that replaces them.
type Orphans struct {
	History, Attempts, Evidence, Reconciliations, Outbox int64
}

// Total is the sum of the counts.
func (o Orphans) Total() int64 {
	return o.History + o.Attempts + o.Evidence + o.Reconciliations + o.Outbox
}

// Orphans reads the counts in one snapshot. It reads every row of the tables it checks: an
// audit, not a hot-path call.
func (l *Ledger) Orphans(ctx context.Context) (Orphans, error) {
	var o Orphans
	err := l.scan(ctx, "orphans", func(q *dbsqlc.Queries) error {
		r, err := q.LedgerOrphans(ctx)
		o = Orphans{History: r.History, Attempts: r.Attempts, Evidence: r.Evidence, Reconciliations: r.Reconciliations, Outbox: r.Outbox}
		return err
	})
	return o, err
}
