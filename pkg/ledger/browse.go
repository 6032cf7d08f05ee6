package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// What operators read: pages of intents and of refused input. Like the sweeper's scans these
// run read-only at READ COMMITTED (scan), so an operator paging through the ledger takes no
// predicate locks and never makes a worker's transition fail to serialize.

// IntentFilter chooses the intents ListIntents returns, and their order. Zero fields do not
// filter.
type IntentFilter struct {
	// State: only intents in this state.
	State State
	// Account: only intents of this account.
	Account string
	// Reason: only intents whose latest transition has this reason.
	Reason Reason
	// Since and Until: only intents whose time is at or after Since and before Until: the time
	// Sort orders by, and the last change (updated_at) in delivery-key order. A zero time does
	// not bound.
	Since, Until time.Time
	// Sort is the order of the page: SortKey (the zero value) or a time.
	Sort IntentSort
	// Descending lists the newest first; only with a time Sort.
	Descending bool
	// After and AfterAt are where the page starts: after the previous page's last intent, its
	// delivery key and, with a time Sort, its time (AfterAt; zero with a zero After: the first
	// page). The zero key starts at the first.
	After   identity.DeliveryKey
	AfterAt time.Time
}

// IntentSort is an order of ListIntents.
type IntentSort string

// The orders of ListIntents. A time order breaks ties in delivery-key order, the same way.
const (
	SortKey     IntentSort = ""        // delivery-key order
	SortCreated IntentSort = "created" // the time the intent was stored
	SortUpdated IntentSort = "updated" // the time of its latest transition
)

// IntentSorts are the orders of ListIntents, SortKey as "key".
var IntentSorts = []string{"key", string(SortCreated), string(SortUpdated)}

// ListIntents returns up to max intents matching f, in f's order: keyset pagination, so that a
// page starts after the previous one's last intent, never at an offset, and reads no history.
// In delivery-key order, on the primary key: a page costs the rows it returns and those the
// filters skip. In a time order, on (that time, delivery key), which no index orders: a page
// reads every intent the filters keep. An intent whose time changes between two pages (a
// transition, in updated order) moves in the order and may be seen twice or not at all; every
// other intent is listed once. Parked intents are read through their own index, so listing them
// costs what they are, however many published intents the ledger holds.
func (l *Ledger) ListIntents(ctx context.Context, f IntentFilter, max int) ([]Intent, error) {
	if f.State != "" && !f.State.Valid() {
		return nil, fmt.Errorf("list intents: %q is not a state", f.State)
	}
	if f.Reason != "" {
		rule, ok := f.Reason.Rule()
		if !ok {
			return nil, fmt.Errorf("list intents: %q is not a reason", f.Reason)
		}
		if f.State != "" && rule.State != f.State {
			return nil, fmt.Errorf("list intents: reason %s is a reason of %s, not of %s", f.Reason, rule.State, f.State)
		}
	}
	timed := f.Sort == SortCreated || f.Sort == SortUpdated
	switch {
	case !timed && f.Sort != SortKey:
		return nil, fmt.Errorf("list intents: %q is not an order (%s)", f.Sort, strings.Join(IntentSorts, ", "))
	case !timed && (f.Descending || !f.AfterAt.IsZero()):
		return nil, errors.New("list intents: newest first and a time to start after need a time order")
	case timed && f.After != (identity.DeliveryKey{}) && f.AfterAt.IsZero():
		return nil, errors.New("list intents: in a time order a page starts after a key and its time")
	case !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until):
		return nil, fmt.Errorf("list intents: since %s is not before until %s", f.Since.Format(time.RFC3339Nano), f.Until.Format(time.RFC3339Nano))
	}
	if max < 1 {
		return nil, fmt.Errorf("list intents: max %d, want at least 1", max)
	}
	bound := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	since, until, afterAt := bound(f.Since), bound(f.Until), bound(f.AfterAt)
	var rows []dbsqlc.Intent
	err := l.scan(ctx, "list intents", func(q *dbsqlc.Queries) (err error) {
		switch {
		case timed && f.State == Parked:
			rows, err = q.ParkedByTimePage(ctx, dbsqlc.ParkedByTimePageParams{ByCreated: f.Sort == SortCreated, AccountID: f.Account, Reason: string(f.Reason),
				Since: since, Until: until, AfterAt: afterAt, AfterKey: f.After.Bytes(), Descending: f.Descending, MaxRows: int32(max)})
		case timed:
			rows, err = q.IntentsByTimePage(ctx, dbsqlc.IntentsByTimePageParams{ByCreated: f.Sort == SortCreated, State: string(f.State), AccountID: f.Account,
				Reason: string(f.Reason), Since: since, Until: until, AfterAt: afterAt, AfterKey: f.After.Bytes(), Descending: f.Descending, MaxRows: int32(max)})
		case f.State == Parked:
			// The people's queue: through the index of the parked, not the whole ledger.
			rows, err = q.ParkedPage(ctx, dbsqlc.ParkedPageParams{AfterKey: f.After.Bytes(), AccountID: f.Account, Reason: string(f.Reason),
				Since: since, Until: until, MaxRows: int32(max)})
		default:
			rows, err = q.IntentsPage(ctx, dbsqlc.IntentsPageParams{AfterKey: f.After.Bytes(), State: string(f.State), AccountID: f.Account,
				Reason: string(f.Reason), Since: since, Until: until, MaxRows: int32(max)})
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Intent, 0, len(rows))
	for _, r := range rows {
		in, err := intentFromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

// RejectPreviewBytes is how many bytes of each refused message Rejects returns.
const RejectPreviewBytes = 256

// StoredRejection is one row of the rejects table as Rejects reads it: the refused message's
// first RejectPreviewBytes bytes, with its full size (the ledger keeps up to MaxRejectRaw).
// Subject, Detail and Headers are the bytes that arrived (ParseStoredText).
type StoredRejection struct {
	ID        string
	Reason    string
	Detail    string
	Subject   string
	Stream    string
	StreamSeq int64 // 0 when the message did not come from a stream
	Headers   map[string][]string
	Preview   []byte
	Size      int    // of the message as it arrived
	Truncated bool   // whether the ledger kept less than Size bytes
	SHA256    []byte // of the whole message; nil in rows stored before the ledger kept it
	At        time.Time
}

// Rejects returns up to max refused input messages, newest first; reason "" means any reason.
func (l *Ledger) Rejects(ctx context.Context, reason string, max int) ([]StoredRejection, error) {
	if max < 1 {
		return nil, fmt.Errorf("list rejects: max %d, want at least 1", max)
	}
	var rows []dbsqlc.RejectsListRow
	err := l.scan(ctx, "list rejects", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.RejectsList(ctx, dbsqlc.RejectsListParams{PreviewBytes: RejectPreviewBytes, Reason: strings.TrimSpace(reason), MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]StoredRejection, len(rows))
	for i, r := range rows {
		if out[i], err = storedRejection(r); err != nil {
			return nil, fmt.Errorf("list rejects: %w", err)
		}
	}
	return out, nil
}

// RejectAt returns the refused input stored from message seq of stream, or ErrNotFound.
func (l *Ledger) RejectAt(ctx context.Context, stream string, seq int64) (StoredRejection, error) {
	var row dbsqlc.RejectAtRow
	err := l.scan(ctx, "reject at", func(q *dbsqlc.Queries) (err error) {
		row, err = q.RejectAt(ctx, dbsqlc.RejectAtParams{PreviewBytes: RejectPreviewBytes, Stream: stream, StreamSeq: seq})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return StoredRejection{}, ErrNotFound
	}
	if err != nil {
		return StoredRejection{}, err
	}
	r, err := storedRejection(dbsqlc.RejectsListRow(row))
	if err != nil {
		return StoredRejection{}, fmt.Errorf("reject at %s %d: %w", stream, seq, err)
	}
	return r, nil
}

func storedRejection(r dbsqlc.RejectsListRow) (StoredRejection, error) {
	headers, err := parseStoredHeaders(r.Headers)
	if err != nil {
		return StoredRejection{}, fmt.Errorf("headers of %s: %w", r.RejectID, err)
	}
	return StoredRejection{ID: r.RejectID, Reason: r.Reason, Detail: ParseStoredText(r.Detail), Subject: ParseStoredText(r.Subject), Stream: r.Stream,
		StreamSeq: r.StreamSeq.Int64, Headers: headers, Preview: r.Preview, Size: int(r.RawSize), Truncated: r.RawTruncated, SHA256: r.RawSha256, At: r.ReceivedAt}, nil
}
