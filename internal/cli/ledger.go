package cli

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/atmost/atmost/pkg/ledger"
)

// openLedger connects to the ledger at url for one command; close releases the connections.
func openLedger(ctx context.Context, url string) (l *ledger.Ledger, close func(), err error) {
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		if pool != nil {
			pool.Close()
		}
		return nil, nil, fmt.Errorf("connect to the ledger (is PostgreSQL running, ATMOST_DATABASE_URL right, and atmost migrate done?): %w", err)
	}
	l, err = ledger.New(pool, ledger.Config{Actor: "atmost-cli"})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return l, pool.Close, nil
}
