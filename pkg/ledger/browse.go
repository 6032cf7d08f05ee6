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

// IntentFilter chooses the intents ListIntents returns. Zero fields do not filter.
type IntentFilter struct {
	// State: only intents in this state.
	State State
	// Account: only intents of this account.
	Account string
	// After: only intents whose delivery key sorts after this one (the last key of the previous
	// page); the zero key starts at the first.
	After identity.DeliveryKey
}

// ListIntents returns up to max intents matching f, in delivery-key order: keyset pagination
// on the primary key, so a page costs the rows it returns and those the filters skip, never an
// offset, and reads no history. Parked intents are paged through their own index, so listing
// them costs what they are, however many published intents the ledger holds.
func (l *Ledger) ListIntents(ctx context.Context, f IntentFilter, max int) ([]Intent, error) {
	if f.State != "" && !f.State.Valid() {
		return nil, fmt.Errorf("list intents: %q is not a state", f.State)
	}
	if max < 1 {
		return nil, fmt.Errorf("list intents: max %d, want at least 1", max)
	}
	var rows []dbsqlc.Intent
	err := l.scan(ctx, "list intents", func(q *dbsqlc.Queries) (err error) {
		if f.State == Parked {
			// The people's queue: through the index of the parked, not the whole ledger.
			rows, err = q.ParkedPage(ctx, dbsqlc.ParkedPageParams{AfterKey: f.After.Bytes(), AccountID: f.Account, MaxRows: int32(max)})
			return err
		}
		rows, err = q.IntentsPage(ctx, dbsqlc.IntentsPageParams{AfterKey: f.After.Bytes(), State: string(f.State), AccountID: f.Account, MaxRows: int32(max)})
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
