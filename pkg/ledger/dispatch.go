package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// GetMany returns the intents of keys that exist, by key, in one read: the dispatcher's look at
// a batch of work before it opens attempts. A key without an intent is absent from the map.
func (l *Ledger) GetMany(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]Intent, error) {
	var rows []dbsqlc.Intent
	err := l.inTx(ctx, "get", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsGetMany(ctx, rawKeys(keys))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get %d intents: %w", len(keys), err)
	}
	out := make(map[identity.DeliveryKey]Intent, len(rows))
	for _, r := range rows {
		in, err := intentFromRow(r)
		if err != nil {
			return nil, fmt.Errorf("get %d intents: %w", len(keys), err)
		}
		out[in.Key] = in
	}
	return out, nil
}

// Gate is what the cheap transient gates say about one account before any attempt is opened.
// It is a read, not a decision: Authorize re-checks every gate in the statement that decides.
type Gate struct {
	Account Account
	// Stopped: a kill switch (the account's or the global one) is engaged.
	Stopped bool
	// RatePerMinute is the account's rate limit; 0 means unlimited.
	RatePerMinute int
	// Tokens is what the account's rate bucket holds now.
	Tokens float64
}

// Admits reports whether the n-th send (from 0) of a batch for this account finds a rate
// token now, and if not, how long until it will.
func (g Gate) Admits(n int) (bool, time.Duration) {
	if g.RatePerMinute == 0 || float64(n)+1 <= g.Tokens {
		return true, 0
	}
	missing := float64(n) + 1 - g.Tokens
	return false, time.Duration(missing * 60 / float64(g.RatePerMinute) * float64(time.Second)).Round(time.Millisecond)
}

// Refusal names the gate that refuses the whole account now ("" when none does): kill_switch
// or credential_revoked. The rate limit is per send: see Admits.
func (g Gate) Refusal() Reason {
	switch {
	case g.Stopped:
		return ReasonKillSwitch
	case g.Account.Revoked:
		return ReasonCredentialRevoked
	}
	return ""
}

// Gates reads the transient gates of accounts, by account id. An account that is not
// configured is absent from the map.
func (l *Ledger) Gates(ctx context.Context, accounts []string) (map[string]Gate, error) {
	var rows []dbsqlc.DispatchGatesRow
	err := l.inTx(ctx, "gates", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.DispatchGates(ctx, dbsqlc.DispatchGatesParams{Now: l.clock(), AccountIds: accounts})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gates of %d accounts: %w", len(accounts), err)
	}
	out := make(map[string]Gate, len(rows))
	for _, r := range rows {
		out[r.AccountID] = Gate{
			Account: Account{ID: r.AccountID, Platform: r.Platform, Settings: json.RawMessage(r.Settings), CredentialRef: r.CredentialRef,
				CredentialVersion: r.CredentialVersion, Revoked: r.Revoked, ContractVersion: r.ContractVersion},
			Stopped:       r.Stopped,
			RatePerMinute: int(r.RatePerMinute),
			Tokens:        r.Tokens,
		}
	}
	return out, nil
}

// UnpublishedFor returns the outbox transitions of the given intents, in key and sequence
// order: what a writer publishes right after its own commit.
func (l *Ledger) UnpublishedFor(ctx context.Context, keys []identity.DeliveryKey) ([]Unpublished, error) {
	raw := rawKeys(keys)
	// READ COMMITTED (see inReadCommitted): every transition committed before the call is
	// seen, which is all the witness needs.
	var rows []dbsqlc.OutboxPendingForRow
	err := l.scan(ctx, fmt.Sprintf("read outbox of %d intents", len(keys)), func(q *dbsqlc.Queries) (err error) {
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
	err := l.scan(ctx, fmt.Sprintf("read the witness of %d authorizations", len(claims)), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OutboxWitnessFor(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return unpublishedRows(rows, func(r dbsqlc.OutboxWitnessForRow) dbsqlc.OutboxPendingRow { return dbsqlc.OutboxPendingRow(r) }, "read the witness")
}

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

// rawKeys is keys as the statements take them.
func rawKeys(keys []identity.DeliveryKey) [][]byte {
	raw := make([][]byte, len(keys))
	for i, k := range keys {
		raw[i] = k.Bytes()
	}
	return raw
}

// keySet is the delivery keys a statement returned.
func keySet(rows [][]byte) (map[identity.DeliveryKey]bool, error) {
	out := make(map[identity.DeliveryKey]bool, len(rows))
	for _, b := range rows {
		k, err := identity.DeliveryKeyFromBytes(b)
		if err != nil {
			return nil, err
		}
		out[k] = true
	}
	return out, nil
}
