package ledger

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// SetClock makes l read the time from now instead of the database where the ledger allows it
// (Authorize), so a test can stand exactly on an edge.
func SetClock(l *Ledger, now func() *time.Time) { l.now = now }

// SetCommit replaces how l commits a transaction, so a test can inject a failure at COMMIT.
func SetCommit(l *Ledger, commit func(ctx context.Context, tx pgx.Tx) error) {
	l.commit, l.commitReplaced = commit, true
}

// SetBrowseWindow makes l's Browse examine at most n intents a page.
func SetBrowseWindow(l *Ledger, n int) { l.browseWindow = n }

// SetForgetDelay makes l wait d, instead of ForgetDelay, before it removes forgotten rows
// without a write, so a test can look at the outbox before that happens.
func SetForgetDelay(l *Ledger, d time.Duration) { l.forget.delay = d }
