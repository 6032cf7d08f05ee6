package role

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// WarnWithoutAutovacuum logs a warning when the ledger's PostgreSQL runs with autovacuum off,
// once the database answers (within a minute; it does not hold the role's start). The ledger's
// outbox is a queue whose every row is deleted moments after it is written, and its other
// tables grow by rows a second: without vacuum the outbox's heap keeps every deleted row and
// without analysis the plans of a new ledger keep fitting its empty tables
// (docs/operating.md#postgresql). CockroachDB has no such setting and is not warned about.
func WarnWithoutAutovacuum(ctx context.Context, pool *pgxpool.Pool, log *zap.Logger) {
	go func() {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for {
			var setting *string
			err := pool.QueryRow(ctx, `SELECT current_setting('autovacuum', true)`).Scan(&setting)
			if err == nil {
				if setting != nil && *setting == "off" {
					log.Warn("PostgreSQL runs with autovacuum off: the outbox's deleted rows stay in its heap and a new ledger's plans stay those of its empty tables; turn it on (docs/operating.md#postgresql)")
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}
