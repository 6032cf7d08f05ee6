package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
func IntentSorts() []string { return slices.Clone(intentSorts) }

var intentSorts = []string{"key", string(SortCreated), string(SortUpdated)}

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
		return nil, fmt.Errorf("list intents: %q is not an order (%s)", f.Sort, strings.Join(intentSorts, ", "))
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

// BrowseWindow is how many intents one Browse page examines at most, in its order, whatever
// its filters: the bound that keeps a page's cost flat on a ledger of millions when the
// filters match few. A page that examined its whole window without filling says so (Searched)
// and its Next cursor continues the search after the window.
const BrowseWindow = 5000

// BrowseFilter chooses the intents Browse returns. Zero fields do not filter.
type BrowseFilter struct {
	// State: only intents in this state; each state is read through its own index.
	State State
	// Reason: only intents whose latest transition has this reason.
	Reason Reason
	// Account: only intents of this account.
	Account string
	// Since, Until: only intents whose last change was at Since or later and before Until.
	Since, Until time.Time
	// Text: only intents whose request, target or occurrence contains it (ignoring case), or
	// whose platform object id is exactly it.
	Text string
}

// BrowseCursor is where a Browse page starts: strictly after the intent changed At with
// delivery key Key, in newest-first order. The zero cursor starts at the newest.
type BrowseCursor struct {
	At  time.Time
	Key identity.DeliveryKey
}

// IsZero reports whether c is the start.
func (c BrowseCursor) IsZero() bool { return c.At.IsZero() && c.Key.IsZero() }

// BrowsePage is one page of Browse.
type BrowsePage struct {
	Intents []Intent
	// Next continues after this page; nil when nothing is left to examine.
	Next *BrowseCursor
	// Searched is true when the page examined BrowseWindow intents and found fewer matches than
	// it asked for: more may match after Next.
	Searched bool
}

// Browse returns up to max intents matching f, newest first (by the time of their last change,
// then by delivery key), after cursor: keyset pagination through the partial index of each
// state, so a page costs at most the BrowseWindow rows it examines however large the ledger,
// never an offset. It reads no history. Like ListIntents it runs read-only at READ COMMITTED.
func (l *Ledger) Browse(ctx context.Context, f BrowseFilter, after BrowseCursor, max int) (BrowsePage, error) {
	if f.State != "" && !f.State.Valid() {
		return BrowsePage{}, fmt.Errorf("browse intents: %q is not a state", f.State)
	}
	if max < 1 || max > l.browseWindow {
		return BrowsePage{}, fmt.Errorf("browse intents: max %d, want 1 to %d", max, l.browseWindow)
	}
	p := dbsqlc.IntentsBrowseParams{
		State: string(f.State), Reason: string(f.Reason), AccountID: f.Account, Text: strings.TrimSpace(f.Text),
		BeforeAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), BeforeKey: []byte{}, // no key sorts before the empty one: the first page ends before Until
		Since: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), ScanRows: int32(l.browseWindow), MaxRows: int32(max) + 1,
	}
	if !f.Until.IsZero() {
		p.BeforeAt = f.Until
	}
	if !f.Since.IsZero() {
		p.Since = f.Since
	}
	if !after.IsZero() {
		p.BeforeAt, p.BeforeKey = after.At, after.Key.Bytes()
	}
	var rows []dbsqlc.IntentsBrowseRow
	err := l.scan(ctx, "browse intents", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsBrowse(ctx, p)
		return err
	})
	if err != nil {
		return BrowsePage{}, err
	}
	var page BrowsePage
	for _, r := range rows {
		in, err := intentFromRow(dbsqlc.Intent{
			DeliveryKey: r.DeliveryKey, AccountID: r.AccountID, Action: r.Action, Target: r.Target, Request: r.Request,
			Occurrence: r.Occurrence, SourceID: r.SourceID, State: r.State, Reason: r.Reason, TransitionSeq: r.TransitionSeq,
			AttemptsAuthorized: r.AttemptsAuthorized, AttemptToken: r.AttemptToken, Epoch: r.Epoch, Generation: r.Generation,
			LeaseExpiresAt: r.LeaseExpiresAt, ObjectID: r.ObjectID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		})
		if err != nil {
			return BrowsePage{}, err
		}
		if r.Matched {
			if len(page.Intents) == max {
				// A match beyond the page: the next page starts after the page's last intent.
				last := page.Intents[max-1]
				page.Next = &BrowseCursor{At: last.UpdatedAt, Key: last.Key}
				return page, nil
			}
			page.Intents = append(page.Intents, in)
		}
		if r.N == int64(l.browseWindow) {
			// The window's last row: whatever follows was not examined, the search goes on there.
			page.Next, page.Searched = &BrowseCursor{At: in.UpdatedAt, Key: in.Key}, len(page.Intents) < max
		}
	}
	return page, nil
}

// Waiting counts the intents that are not published, by state and reason, each state through
// the index that holds only it. Published intents, most of a ledger, are not counted: Changed
// counts the recent ones.
func (l *Ledger) Waiting(ctx context.Context) (map[State]map[Reason]int64, error) {
	var rows []dbsqlc.IntentsWaitingRow
	err := l.scan(ctx, "waiting intents", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsWaiting(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := map[State]map[Reason]int64{}
	for _, r := range rows {
		add(out, State(r.State), Reason(r.Reason), r.N)
	}
	return out, nil
}

// Changed counts the intents whose last change was at since or later, by state and reason.
func (l *Ledger) Changed(ctx context.Context, since time.Time) (map[State]map[Reason]int64, error) {
	var rows []dbsqlc.IntentsChangedRow
	err := l.scan(ctx, "changed intents", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsChanged(ctx, since)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := map[State]map[Reason]int64{}
	for _, r := range rows {
		add(out, State(r.State), Reason(r.Reason), r.N)
	}
	return out, nil
}

func add(m map[State]map[Reason]int64, s State, r Reason, n int64) {
	if m[s] == nil {
		m[s] = map[Reason]int64{}
	}
	m[s][r] += n
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
