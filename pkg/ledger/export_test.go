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
func SetCommit(l *Ledger, commit func(ctx context.Context, tx pgx.Tx) error) { l.commit = commit }

// SetBrowseWindow makes Browse examine at most n intents a page until the test ends.
func SetBrowseWindow(t interface{ Cleanup(func()) }, n int) {
	old := browseWindow
	browseWindow = n
	t.Cleanup(func() { browseWindow = old })
}
