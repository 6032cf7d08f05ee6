package ledger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// ForgetDelay is how long rows ForgetLater queued wait for a write transaction to carry their
// removal before one of their own removes them.
const ForgetDelay = 100 * time.Millisecond

// forgetting is the outbox rows whose events JetStream acknowledged, waiting to be removed by
// the Ledger's next hot write transaction (ForgetLater).
type forgetting struct {
	mu      sync.Mutex
	batches []forgotten
	armed   bool          // a flush is scheduled
	delay   time.Duration // zero: ForgetDelay (tests set it)
}

// forgotten is one ForgetLater call: its rows and whom to tell which of them a removal took.
type forgotten struct {
	rows    []Unpublished
	removed func([]Unpublished)
}

// ForgetLater is Published for a writer that writes again soon (the dispatcher, ingest): the
// rows, whose events JetStream acknowledged, are removed from the outbox by the next
// transaction of Submit, BeginMany, AuthorizeMany or CompleteMany that this Ledger commits, as
// one statement more in it, rather than by a transaction of their own: a commit costs the
// server about as much CPU as the statements of a batch it carries, and the pipeline made one
// such transaction for every write. Without such a transaction within ForgetDelay, one of
// their own removes them. removed, where not nil, is called, after the commit, with the rows
// that removal took (none twice; a removal that failed or whose commit is unknown leaves its
// rows to the next try, then to the relays, and calls nothing for them, so counters fall
// short, never over). Until then the rows stay in the outbox, and a relay round that reads them publishes
// them again, under the same message ids (JetStream drops the copies; consumers drop events
// by id). The transitions are on the stream either way: only their bookkeeping waits.
//
// At SERIALIZABLE it is Published, at once (and removed called before it returns): a delete
// in a serializable write transaction takes predicate locks on the outbox, which every writer
// appends to.
func (l *Ledger) ForgetLater(ctx context.Context, rows []Unpublished, removed func([]Unpublished)) error {
	if len(rows) == 0 {
		return nil
	}
	if l.cfg.Isolation != pgx.ReadCommitted {
		gone, err := l.Published(ctx, rows)
		if err != nil {
			return err
		}
		if removed != nil {
			removed(gone)
		}
		return nil
	}
	l.forget.mu.Lock()
	defer l.forget.mu.Unlock()
	l.forget.batches = append(l.forget.batches, forgotten{rows: rows, removed: removed})
	l.armFlush()
	return nil
}

// armFlush schedules a removal of the queued rows ForgetDelay from now, unless one is
// scheduled. Called with forget.mu held.
func (l *Ledger) armFlush() {
	if l.forget.armed {
		return
	}
	l.forget.armed = true
	delay := l.forget.delay
	if delay == 0 {
		delay = ForgetDelay
	}
	time.AfterFunc(delay, func() {
		l.forget.mu.Lock()
		l.forget.armed = false
		l.forget.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = l.FlushForgotten(ctx)
	})
}

// FlushForgotten removes the rows ForgetLater queued now, in a transaction of its own: what a
// writer that stops calls last. Rows it could not remove are queued again, for the next write
// (no flush is scheduled for them: a ledger whose database is gone does not try forever; the
// relays' rounds remove them meanwhile).
func (l *Ledger) FlushForgotten(ctx context.Context) error {
	taken := l.takeForgotten()
	if len(taken) == 0 {
		return nil
	}
	p := forgetParams(taken)
	var rows []dbsqlc.OutboxDeleteRow
	err := l.inReadCommittedPipelined(ctx, "outbox", l.outboxPlans(ctx), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OutboxDelete(ctx, p)
		return err
	})
	if err != nil {
		l.requeueForgotten(taken, false)
		return fmt.Errorf("clear outbox: %w", err)
	}
	return tellForgotten(taken, rows)
}

// inTxForgetting is inTx for the hot writers, whose operations are one statement each: the
// same transaction first removes the rows ForgetLater queued, so that their removal rides on a
// commit made anyway, and the statements go to the server with BEGIN and those after fn's
// (inTxPipelined), planned as hotPlans has it. A transaction that does not commit queues them
// again.
func (l *Ledger) inTxForgetting(ctx context.Context, what string, after []ahead, fn func(q *dbsqlc.Queries) error) error {
	taken := l.takeForgotten()
	if len(taken) == 0 {
		return l.inTxPipelined(ctx, what, l.hotPlans(ctx), after, fn)
	}
	var rows []dbsqlc.OutboxDeleteRow
	err := l.inTxPipelined(ctx, what, l.hotAhead(ctx, outboxDeleteAhead(forgetParams(taken), &rows)), after, fn)
	if err != nil {
		l.requeueForgotten(taken, true)
		return err
	}
	_ = tellForgotten(taken, rows)
	return nil
}

// outboxDeleteAhead is OutboxDelete as a statement ahead of another: the rows it removed go
// to *removed (anew on every try).
func outboxDeleteAhead(p dbsqlc.OutboxDeleteParams, removed *[]dbsqlc.OutboxDeleteRow) ahead {
	sql, args := recorded(func(q *dbsqlc.Queries) error { _, err := q.OutboxDelete(context.Background(), p); return err })
	return ahead{sql: sql, args: args, rows: func(rows pgx.Rows) error {
		*removed = (*removed)[:0]
		for rows.Next() {
			var r dbsqlc.OutboxDeleteRow
			if err := rows.Scan(&r.DeliveryKey, &r.Seq); err != nil {
				return fmt.Errorf("clear outbox: %w", err)
			}
			*removed = append(*removed, r)
		}
		return nil
	}}
}

func (l *Ledger) takeForgotten() []forgotten {
	l.forget.mu.Lock()
	defer l.forget.mu.Unlock()
	taken := l.forget.batches
	l.forget.batches = nil
	return taken
}

// requeueForgotten queues taken again, first, and schedules a flush when flush says so.
func (l *Ledger) requeueForgotten(taken []forgotten, flush bool) {
	l.forget.mu.Lock()
	defer l.forget.mu.Unlock()
	l.forget.batches = append(taken, l.forget.batches...)
	if flush {
		l.armFlush()
	}
}

// forgetParams is the delete of the rows of taken, in key and sequence order: two removals of
// overlapping rows lock them in one order.
func forgetParams(taken []forgotten) dbsqlc.OutboxDeleteParams {
	type row struct {
		key []byte
		seq int64
	}
	var all []row
	for _, f := range taken {
		for _, u := range f.rows {
			all = append(all, row{u.Key.Bytes(), u.Seq})
		}
	}
	slices.SortFunc(all, func(a, b row) int {
		if c := slices.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	p := dbsqlc.OutboxDeleteParams{DeliveryKeys: make([][]byte, len(all)), Seqs: make([]int64, len(all))}
	for i, r := range all {
		p.DeliveryKeys[i], p.Seqs[i] = r.key, r.seq
	}
	return p
}

// outboxRow names one row of the outbox.
type outboxRow struct {
	key identity.DeliveryKey
	seq int64
}

// deletedRows is the set of the rows an OutboxDelete returned: the ones it removed.
func deletedRows(deleted []dbsqlc.OutboxDeleteRow) (map[outboxRow]bool, error) {
	gone := make(map[outboxRow]bool, len(deleted))
	for _, r := range deleted {
		key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("clear outbox: %w", err)
		}
		gone[outboxRow{key, r.Seq}] = true
	}
	return gone, nil
}

// tellForgotten calls each batch's removed with its rows that the delete returned.
func tellForgotten(taken []forgotten, deleted []dbsqlc.OutboxDeleteRow) error {
	gone, err := deletedRows(deleted)
	if err != nil {
		return err
	}
	for _, f := range taken {
		var removed []Unpublished
		for _, u := range f.rows {
			if gone[outboxRow{u.Key, u.Seq}] {
				removed = append(removed, u)
				delete(gone, outboxRow{u.Key, u.Seq}) // a row queued twice is counted once
			}
		}
		if len(removed) > 0 && f.removed != nil {
			f.removed(removed)
		}
	}
	return nil
}
