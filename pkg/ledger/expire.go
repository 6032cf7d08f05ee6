package ledger

import (
	"context"
	"fmt"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// Expired counts what ExpireLeases did.
type Expired struct {
	// Abandoned claims expired before authorization: nothing was sent, the intents are free.
	Abandoned int
	// Indeterminate authorizations expired: bytes may have left, the outcome is unknown.
	Indeterminate int
	// Changed lists the intents that moved, for the caller to publish.
	Changed []identity.DeliveryKey
}

// ExpireLeases ends up to max expired leases, one way only: an expired pre-authorization claim
// is abandoned (the intent is free again), an expired authorization becomes indeterminate;
// nothing goes back to pending from authorized. Safe to run from any number of sweepers at
// once: each row is changed by one of them, and only while its lease is still expired.
func (l *Ledger) ExpireLeases(ctx context.Context, max int) (Expired, error) {
	if max <= 0 {
		return Expired{}, fmt.Errorf("expire leases: max must be positive, got %d", max)
	}
	// Find the candidates in a transaction of their own, then change them by primary key: the
	// change never rests on a scan of a shared index (docs/design.md#the-sql-dialect).
	var keys [][]byte
	err := l.inTx(ctx, string(OpExpire), func(q *dbsqlc.Queries) (err error) {
		keys, err = q.IntentsWithExpiredLease(ctx, int32(max))
		return err
	})
	if err != nil || len(keys) == 0 {
		return Expired{}, err
	}
	var rows []dbsqlc.IntentsExpireLeasesRow
	err = l.inTx(ctx, string(OpExpire), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsExpireLeases(ctx, dbsqlc.IntentsExpireLeasesParams{DeliveryKeys: keys, Actor: l.cfg.Actor})
		return err
	})
	if err != nil {
		return Expired{}, fmt.Errorf("expire leases: %w", err)
	}
	var n Expired
	for _, r := range rows {
		key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
		if err != nil {
			return n, fmt.Errorf("expire leases: %w", err)
		}
		n.Changed = append(n.Changed, key)
		switch State(r.State) {
		case Pending:
			n.Abandoned++
		case Indeterminate:
			n.Indeterminate++
		}
	}
	return n, nil
}
