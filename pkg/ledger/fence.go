package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
)

// This file holds the parks made before an attempt: an intent its adapter cannot render, and
// intents resting on a source version that is no longer the stored head (the freshness fence).
// Nothing is sent, no attempt is opened.

// ParkUnsendable parks a pending intent that its platform adapter cannot render
// (request_unsendable), with why in the history row's detail: no attempt was opened and nothing
// was sent, and no change of configuration would make it sendable, so a human decides. Refused
// with ErrInvalidTransition unless the intent is pending with no claim.
func (l *Ledger) ParkUnsendable(ctx context.Context, key identity.DeliveryKey, why string) error {
	detail, err := detailJSON(map[string]any{"why": why})
	if err != nil {
		return err
	}
	var row dbsqlc.IntentParkUnsendableRow
	err = l.inTx(ctx, string(OpPark), func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentParkUnsendable(ctx, dbsqlc.IntentParkUnsendableParams{DeliveryKey: key.Bytes(), Actor: l.cfg.Actor, Detail: detail})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return refused(OpPark, ErrNotFound, "")
	}
	if err != nil {
		return fmt.Errorf("park %s as unsendable: %w", key, err)
	}
	if !row.Changed {
		return refused(OpPark, ErrInvalidTransition, State(row.PriorState))
	}
	return nil
}

// Superseded is the freshness fence, a read: the intents among keys that rest on a source
// version that is no longer the source's stored head. They can never be authorized
// (superseded_source), so the dispatcher parks them with ParkSuperseded before it spends
// anything on them. Intents without a source are never superseded.
func (l *Ledger) Superseded(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]bool, error) {
	var rows [][]byte
	err := l.scan(ctx, "freshness fence", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsSuperseded(ctx, rawKeys(keys))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("freshness fence of %d intents: %w", len(keys), err)
	}
	return keySet(rows)
}

// ParkSuperseded parks the pending intents among keys whose source moved on
// (superseded_source) before any attempt: none is opened and nothing is sent. Only an intent
// that is pending, held by nobody and still superseded (tested in the statement that changes
// it) is parked; it returns those it parked, and the others are left as they are.
func (l *Ledger) ParkSuperseded(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]bool, error) {
	if _, err := indexKeys(len(keys), func(i int) identity.DeliveryKey { return keys[i] }); err != nil {
		return nil, fmt.Errorf("park superseded: %w", err)
	}
	var rows [][]byte
	err := l.inTx(ctx, string(OpPark), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsParkSuperseded(ctx, dbsqlc.IntentsParkSupersededParams{DeliveryKeys: rawKeys(keys), Actor: l.cfg.Actor})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("park %d superseded intents: %w", len(keys), err)
	}
	return keySet(rows)
}
