package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// Unpublished is a transition whose event has not been acknowledged by JetStream yet: its
// history row, the intent's account and stored traceparent ("" for none), and whether it also
// asks for dispatch (a transition into pending).
type Unpublished struct {
	Transition
	Key         identity.DeliveryKey
	Account     string
	Dispatch    bool
	TraceParent string
}

// Unpublished returns up to max transitions from the outbox, oldest first, of those that have
// been there for settled or longer by the database's clock (0: every one). It reads at READ
// COMMITTED (see inReadCommittedPipelined): every transition committed before the call is seen.
func (l *Ledger) Unpublished(ctx context.Context, max int, settled time.Duration) ([]Unpublished, error) {
	var rows []dbsqlc.OutboxPendingRow
	err := l.scanOne(ctx, "read outbox", l.outboxPlans(ctx), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OutboxPending(ctx, dbsqlc.OutboxPendingParams{SettledMs: settled.Milliseconds(), MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, err
	}
	return unpublishedRows(rows, func(r dbsqlc.OutboxPendingRow) dbsqlc.OutboxPendingRow { return r }, "read outbox")
}

// unpublishedRows converts the rows of the outbox reads, which sqlc gives a type each.
func unpublishedRows[R any](rows []R, row func(R) dbsqlc.OutboxPendingRow, what string) ([]Unpublished, error) {
	out := make([]Unpublished, 0, len(rows))
	for _, r := range rows {
		u, err := unpublishedFromRow(row(r))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Published removes transitions whose events JetStream acknowledged from the outbox and
// returns those this call removed; one already removed (by another relay, or by this one's
// other path) is not an error and is not returned.
func (l *Ledger) Published(ctx context.Context, done []Unpublished) ([]Unpublished, error) {
	if len(done) == 0 {
		return nil, nil
	}
	p := forgetParams([]forgotten{{rows: done}})
	var rows []dbsqlc.OutboxDeleteRow
	err := l.inReadCommittedPipelined(ctx, "outbox", l.outboxPlans(ctx), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OutboxDelete(ctx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("clear outbox: %w", err)
	}
	gone, err := deletedRows(rows)
	if err != nil {
		return nil, err
	}
	removed := make([]Unpublished, 0, len(rows))
	for _, u := range done {
		if gone[outboxRow{u.Key, u.Seq}] {
			removed = append(removed, u)
		}
	}
	return removed, nil
}

func unpublishedFromRow(r dbsqlc.OutboxPendingRow) (Unpublished, error) {
	key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
	if err != nil {
		return Unpublished{}, err
	}
	u := Unpublished{Key: key, Account: r.AccountID, Dispatch: r.Dispatch, TraceParent: r.Traceparent.String, Transition: Transition{
		Seq: r.Seq, From: State(r.FromState.String), To: State(r.ToState), Reason: Reason(r.Reason),
		Epoch: r.Epoch.Int64, Generation: r.Generation.Int64, Actor: r.Actor, At: r.At,
	}}
	if r.AttemptToken != nil {
		token, err := identity.AttemptTokenFromBytes(r.AttemptToken)
		if err != nil {
			return Unpublished{}, err
		}
		u.Token = &token
	}
	return u, nil
}

// OutboxLag returns how many transitions wait in the outbox and how long the oldest has waited,
// by the database's clock: how far the relays are behind.
func (l *Ledger) OutboxLag(ctx context.Context) (rows int64, oldest time.Duration, err error) {
	var r dbsqlc.OutboxLagRow
	err = l.scan(ctx, "outbox lag", func(q *dbsqlc.Queries) (err error) {
		r, err = q.OutboxLag(ctx)
		return err
	})
	return r.Rows, time.Duration(r.OldestMs) * time.Millisecond, err
}

// UnpublishedFor returns the outbox transitions of the given intents, in key and sequence
// order: what a writer publishes right after its own commit.
func (l *Ledger) UnpublishedFor(ctx context.Context, keys []identity.DeliveryKey) ([]Unpublished, error) {
	raw := rawKeys(keys)
	// READ COMMITTED (see inReadCommittedPipelined): every transition committed before the call is
	// seen, which is all the witness needs.
	var rows []dbsqlc.OutboxPendingForRow
	err := l.scanOne(ctx, fmt.Sprintf("read outbox of %d intents", len(keys)), l.outboxPlans(ctx), func(q *dbsqlc.Queries) (err error) {
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
	err := l.scanOne(ctx, fmt.Sprintf("read the witness of %d authorizations", len(claims)), l.outboxPlans(ctx), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.OutboxWitnessFor(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	return unpublishedRows(rows, func(r dbsqlc.OutboxWitnessForRow) dbsqlc.OutboxPendingRow { return dbsqlc.OutboxPendingRow(r) }, "read the witness")
}

// Outboxed is what a hot write (Submit, BeginMany, AuthorizeMany, CompleteMany) left in the
// outbox of one intent, for its writer to publish right after the commit without reading the
// outbox back (relay.Relay.PublishWritten).
type Outboxed struct {
	// Rows are the intent's transitions in the outbox once the write committed, in sequence
	// order: the ones the write made, and, where Complete, the ones an earlier transaction
	// left unpublished (its ingester's or dispatcher's publication not yet removed, or failed).
	Rows []Unpublished
	// Complete says Rows are all of them. At READ COMMITTED the write's transaction reads the
	// earlier ones behind its statement (OutboxEarlierFor, no round trip of its own); at
	// SERIALIZABLE that read would conflict with every writer appending to the outbox, so Rows
	// are the write's own and the writer reads the rest after the commit (UnpublishedFor).
	Complete bool
}

// Written gathers what the writes of a batch left in the outbox, for its writer to publish,
// each transition once.
type Written struct {
	// Rows are the transitions the writes named.
	Rows []Unpublished
	// Unread are the intents whose outbox rows the writes could not all name (Outboxed not
	// Complete): the writer reads them (UnpublishedFor) and publishes them instead.
	Unread []identity.DeliveryKey
	// Acknowledged are, by intent, the sequence up to which JetStream had acknowledged its
	// transitions before the writer took it up (AddAfter): what the outbox still holds of them
	// is their own publisher's to remove, and is neither published again nor removed here.
	Acknowledged map[identity.DeliveryKey]int64
	// named are the transitions among Rows: two writes of one batch can name the same one
	// (ingest's messages submitted one by one after the database refused their batch, an
	// intent twice among them, both find its submission still in the outbox), and a
	// transition held twice in a publication is sent twice and waits for an answer its copy
	// never gets.
	named map[outboxRow]bool
}

// Add adds what one write left of the intent key.
func (w *Written) Add(key identity.DeliveryKey, o Outboxed) { w.AddAfter(key, o, 0) }

// AddAfter is Add for an intent whose transitions up to sequence acked JetStream had
// acknowledged before its writer took it up (the dispatcher's work item followed them,
// events.WorkItem.Follows): they are left out, here and from what is read back of Unread. A
// submission its ingester published is then published and removed once, by its ingester,
// instead of a second time by the dispatcher too, whose removal waited for the ingester's.
func (w *Written) AddAfter(key identity.DeliveryKey, o Outboxed, acked int64) {
	if acked > 0 {
		if w.Acknowledged == nil {
			w.Acknowledged = map[identity.DeliveryKey]int64{}
		}
		w.Acknowledged[key] = acked
	}
	if !o.Complete {
		w.Unread = append(w.Unread, key)
		return
	}
	for _, u := range o.Rows {
		if u.Seq <= acked || w.named[outboxRow{u.Key, u.Seq}] {
			continue
		}
		if w.named == nil {
			w.named = map[outboxRow]bool{}
		}
		w.named[outboxRow{u.Key, u.Seq}] = true
		w.Rows = append(w.Rows, u)
	}
}

// Unacknowledged is rows without those Acknowledged names: what a writer publishes of rows
// it read back.
func (w Written) Unacknowledged(rows []Unpublished) []Unpublished {
	if len(w.Acknowledged) == 0 {
		return rows
	}
	out := rows[:0:0]
	for _, u := range rows {
		if u.Seq > w.Acknowledged[u.Key] {
			out = append(out, u)
		}
	}
	return out
}

// Empty reports whether there is nothing to publish.
func (w Written) Empty() bool { return len(w.Rows) == 0 && len(w.Unread) == 0 }

// earlier is what a hot write reads behind its statement of what the outbox holds of its
// intents that earlier transactions left (OutboxEarlierFor), by intent; nil at SERIALIZABLE,
// where it is not read (Outboxed.Complete).
type earlier struct {
	rows map[identity.DeliveryKey][]Unpublished
	read bool
	// writer marks the outbox rows of the write's own statement (its Writer parameter), which
	// the read leaves out; 0 where it is not read (the statement's rows then carry none).
	writer int64
}

// earlierBehind is the read of earlier rows behind a hot write's statement, planned as the
// hot statement is (hotPlans, ahead of the transaction's), at READ COMMITTED only; e.rows gets
// its rows anew on every try. acked(i), where not nil, is the sequence up to which JetStream
// acknowledged the transitions of keys[i] before the write (Claim.Acknowledged): those are not
// read. The write's statement takes e.writer as its Writer, so that the read leaves out what
// the statement itself wrote.
func (l *Ledger) earlierBehind(keys [][]byte, acked func(i int) int64, e *earlier) []ahead {
	if l.cfg.Isolation != pgx.ReadCommitted {
		return nil
	}
	e.read = true
	for e.writer == 0 {
		// 63 random bits: the rows another write left of the same intents carry another number
		// in all likelihood; a match would leave them to the slow path, published late and after
		// the write's own.
		e.writer = rand.Int64()
	}
	p := dbsqlc.OutboxEarlierForParams{DeliveryKeys: make([][]byte, 0, len(keys)), AfterSeqs: make([]int64, 0, len(keys)), Writer: e.writer}
	at := make(map[string]int, len(keys))
	for i, k := range keys {
		var after int64
		if acked != nil {
			after = acked(i)
		}
		if j, twice := at[string(k)]; twice { // a key a batch holds twice is read once, all of it
			p.AfterSeqs[j] = min(p.AfterSeqs[j], after)
			continue
		}
		at[string(k)] = len(p.DeliveryKeys)
		p.DeliveryKeys, p.AfterSeqs = append(p.DeliveryKeys, k), append(p.AfterSeqs, after)
	}
	sql, args := recorded(func(q *dbsqlc.Queries) error { _, err := q.OutboxEarlierFor(context.Background(), p); return err })
	return []ahead{{sql: sql, args: args, rows: func(rows pgx.Rows) error {
		e.rows = map[identity.DeliveryKey][]Unpublished{}
		for rows.Next() {
			var r dbsqlc.OutboxPendingRow
			if err := rows.Scan(&r.DeliveryKey, &r.Seq, &r.Dispatch, &r.AccountID, &r.FromState, &r.ToState, &r.Reason,
				&r.AttemptToken, &r.Epoch, &r.Generation, &r.Actor, &r.At, &r.Traceparent); err != nil {
				return fmt.Errorf("read outbox: %w", err)
			}
			u, err := unpublishedFromRow(r)
			if err != nil {
				return fmt.Errorf("read outbox: %w", err)
			}
			e.rows[u.Key] = append(e.rows[u.Key], u)
		}
		return nil
	}}}
}

// outboxed is what the write left of the intent key: the earlier rows, then its own. The
// earlier ones come first in sequence too: they were committed before the write's statement
// locked the intent and took its next sequence.
func (e *earlier) outboxed(key identity.DeliveryKey, own []Unpublished) Outboxed {
	rows := own
	if before := e.rows[key]; len(before) > 0 {
		rows = append(append(make([]Unpublished, 0, len(before)+len(own)), before...), own...)
	}
	return Outboxed{Rows: rows, Complete: e.read}
}

// outboxed is the part of a hot write's row that names the transition it wrote, as its event
// carries it (the statements' out_* columns; seq NULL where it wrote none). Begin names a
// stale claim's abandonment, written before its claim, in a row of its own (older).
type outboxed struct {
	key         []byte
	older       bool
	seq         pgtype.Int8
	dispatch    bool
	account     pgtype.Text
	from        string // "" for none
	to, reason  pgtype.Text
	token       []byte
	epoch, gen  pgtype.Int8
	actor       string
	at          time.Time
	traceparent pgtype.Text
}

// unpublished is the transition o names, if it names one.
func (o outboxed) unpublished() (Unpublished, bool, error) {
	if !o.seq.Valid {
		return Unpublished{}, false, nil
	}
	u, err := unpublishedFromRow(dbsqlc.OutboxPendingRow{
		DeliveryKey: o.key, Seq: o.seq.Int64, Dispatch: o.dispatch, AccountID: o.account.String,
		FromState: pgtype.Text{String: o.from, Valid: o.from != ""}, ToState: o.to.String, Reason: o.reason.String,
		AttemptToken: o.token, Epoch: o.epoch, Generation: o.gen, Actor: o.actor, At: o.at, Traceparent: o.traceparent,
	})
	return u, err == nil, err
}

// addOutboxed appends the transition o names, if any, to rows, keeping them in sequence order.
func addOutboxed(rows []Unpublished, o outboxed) ([]Unpublished, error) {
	u, ok, err := o.unpublished()
	if err != nil || !ok {
		return rows, err
	}
	rows = append(rows, u)
	for i := len(rows) - 1; i > 0 && rows[i].Seq < rows[i-1].Seq; i-- {
		rows[i], rows[i-1] = rows[i-1], rows[i]
	}
	return rows, nil
}
