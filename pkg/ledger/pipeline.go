package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// The hot operations are transactions of one statement (a write may carry the outbox's
// delayed delete ahead of it, ForgetLater, and at READ COMMITTED the read of what the outbox
// held before it behind it, earlierBehind). Sent one message at a time they cost a round trip
// per message (BEGIN, the delete, the statement, COMMIT), and every round trip costs both
// processes system calls and a wake-up: under a steady load, whose batches are small, most of
// what an intent cost. Pipelined, BEGIN, the statements and COMMIT go to the server together,
// one round trip. A write's COMMIT used to follow on its own, after its rows were read; but
// nothing a write's rows say makes it roll back (every guard is in the statement, and the
// callers read the rows after the transaction), and a COMMIT's answer can always be lost, so
// every caller already treats a failed write as one that may have committed. COMMIT's answer
// is read after the rows, and its failure (or a transaction that ended rolled back) fails the
// operation. A test that injects failures at COMMIT (l.commit replaced) has every message
// sent on its own, as before.

// batchSender is a DB that also sends a batch of statements in one round trip: a
// *pgxpool.Pool. A DB that is not one (a test's wrapper) gets one message at a time.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// ahead is a statement sent before the one fn runs (or, in after, behind it), in the same
// transaction, with what to do with its rows.
type ahead struct {
	sql  string
	args []any
	rows func(pgx.Rows) error
}

// runAhead runs the statements before (or after) on tx, one message each: the transactions
// that cannot be pipelined.
func runAhead(ctx context.Context, tx pgx.Tx, before []ahead) error {
	for _, a := range before {
		rows, err := tx.Query(ctx, a.sql, a.args...)
		if err != nil {
			return err
		}
		if err := a.read(rows); err != nil {
			return err
		}
	}
	return nil
}

// read hands rows to a.rows (a statement without rows has none) and closes them.
func (a ahead) read(rows pgx.Rows) error {
	var err error
	if a.rows != nil {
		err = a.rows(rows)
	}
	rows.Close()
	if err == nil {
		err = rows.Err()
	}
	return err
}

// The outbox's statements go through its primary key, whatever the outbox held when
// PostgreSQL planned them (outboxPlans ahead of them). The outbox is a queue: every transition
// inserts a row and deletes it moments later, so the table is nearly empty whenever it is
// analyzed, and a plan made then reads it whole (a sequential scan, the cheapest way through a
// page or two). Between two vacuums its heap grows with the rows deleted meanwhile, thousands a
// second, and the plan PostgreSQL caches for a prepared statement after its first five runs
// read them all: at 1,000 intents a second on a ledger whose autovacuum had not run, 1.1 ms per
// read of 17 rows. With sequential scans off the plans use an index at any size, so the plan
// cached stays right: planning each call instead, for the table of the moment, cost a fifth of
// the outbox's statement time at 1,000 intents a second (0.17 ms per read behind a write).
// With bitmap scans off too, the index is walked in key order, and a delete locks its rows in
// that order, as every batch does: two removals of the same rows (ingest's and a dispatcher's
// of a submission both published) wait for each other and never deadlock. A bitmap scan, which
// PostgreSQL plans for a delete on an outbox of many rows, takes them in the heap's order, and
// a removal planned so deadlocked with one planned on a nearly empty outbox (PostgreSQL broke
// each cycle after deadlock_timeout, a second). Without JIT compilation: sequential scans off,
// and a bloated outbox's row estimate, put a read above jit_above_cost, and compiling it took
// 5 to 25 ms a call.
//
// The hot operations' statements (Submit, GetMany, Gates, Begin, Authorize, Complete) reach
// their rows by key too, and run with sequential scans off (hotPlans) for the same reason: a
// ledger's tables grow from nothing, and a plan cached while they were small (a new ledger,
// before anything analyzed it) read every intent, attempt or account for each batch once they
// were not. At 1,000 intents a second on a new ledger whose autovacuum never ran, a batch's
// GetMany of 22-32 intents took 4.7-7.0 ms and Begin, Authorize and Complete 5 to 13 ms each,
// and PostgreSQL spent 0.97-1.22 ms of CPU per intent; with sequential scans off, 0.67-0.69
// ms, as on a ledger analyzed at its size, where the plans do not change. Bitmap scans
// stay on for them: they lock their rows in key order themselves (ORDER BY ... FOR UPDATE).
//
// Both sets of statements are planned once per connection (plan_cache_mode
// force_generic_plan). Left to choose, PostgreSQL plans a prepared statement anew for each
// call while a plan for the call's own arguments looks cheaper than the generic one, and for
// a batch of a few keys it does: at a batch of one, Gates, GetMany and the read behind every
// hot write were planned at every call, 0.15-0.19 ms of the server's CPU each where running
// them took 0.01-0.03 ms, and Authorize was too, several milliseconds a call; a light load's
// batches are that small. The generic plans are the ones the settings above make right at any
// size.
//
// Only on PostgreSQL (CockroachDB has none of these settings, nor the problems: its deletes
// leave no heap to scan, its locks are not taken in a scan's order, and it collects its
// tables' statistics as they grow).
//
// Each set of settings is one statement (set_config, for the transaction only), because each
// statement costs the server a parse, a bind and an execution, and they go ahead of every
// transaction of the pipeline.
var (
	outboxSettings = ahead{sql: "SELECT set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true), set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)"}
	hotSettings    = ahead{sql: "SELECT set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)"}
	inKeyOrder     = ahead{sql: "SET LOCAL enable_bitmapscan = off"}
	defaultBitmaps = ahead{sql: "SET LOCAL enable_bitmapscan TO DEFAULT"}
)

// outboxPlans are the statements ahead of an outbox statement that plan it through the
// outbox's indexes (on PostgreSQL; nothing elsewhere).
func (l *Ledger) outboxPlans(ctx context.Context) []ahead {
	if !l.isPostgres(ctx) {
		return nil
	}
	return []ahead{outboxSettings}
}

// hotPlans are the statements ahead of a hot operation's statement that plan it through the
// tables' indexes (on PostgreSQL; nothing elsewhere). The read behind a hot write
// (OutboxEarlierFor) is planned by them too: a read needs no key order.
func (l *Ledger) hotPlans(ctx context.Context) []ahead {
	if !l.isPostgres(ctx) {
		return nil
	}
	return []ahead{hotSettings}
}

// hotAhead is hotPlans with an outbox statement sent ahead of the hot one in the same
// transaction, planned as outboxPlans has it, bitmap scans on again for the statement that
// follows.
func (l *Ledger) hotAhead(ctx context.Context, a ahead) []ahead {
	plans := l.hotPlans(ctx)
	if plans == nil {
		return []ahead{a}
	}
	return append(plans, inKeyOrder, a, defaultBitmaps)
}

// isPostgres reports whether the ledger's database is PostgreSQL rather than CockroachDB,
// asked once (until an answer comes: a database that cannot be reached is asked again).
func (l *Ledger) isPostgres(ctx context.Context) bool {
	l.dialect.Lock()
	defer l.dialect.Unlock()
	if l.dialect.known {
		return l.dialect.postgres
	}
	crdb, answered := false, false
	version := ahead{sql: "SELECT version() LIKE 'CockroachDB%'", rows: func(rows pgx.Rows) error {
		if rows.Next() {
			answered = true
			return rows.Scan(&crdb)
		}
		return nil
	}}
	if err := l.scanAfter(ctx, "server", []ahead{version}, func(*dbsqlc.Queries) error { return nil }); err != nil || !answered {
		return false
	}
	l.dialect.known, l.dialect.postgres = true, !crdb
	return l.dialect.postgres
}

// errSecondStatement is what a pipelined transaction answers a second statement with: it is
// for operations of one statement only.
var errSecondStatement = errors.New("ledger: a pipelined transaction runs one statement")

// errPipelinedRow is what a pipelined transaction answers QueryRow with.
var errPipelinedRow = errors.New("ledger: a pipelined transaction runs a statement of many rows (:many), not QueryRow")

// pipelined is the connection fn runs its one statement on: the statement is sent with BEGIN
// (and the statements ahead of it and behind it, and COMMIT) in one batch.
type pipelined struct {
	db       batchSender
	opts     pgx.TxOptions
	before   []ahead
	after    []ahead
	results  pgx.BatchResults
	tx       pgx.Tx
	closed   bool
	closeErr error
}

// send sends the batch with sql as its statement and reads the results before it: BEGIN's
// and those of the statements ahead.
func (p *pipelined) send(ctx context.Context, sql string, args []any) error {
	if p.results != nil {
		return errSecondStatement
	}
	b := &pgx.Batch{}
	b.BeginTx(p.opts)
	for _, a := range p.before {
		b.Queue(a.sql, a.args...)
	}
	b.Queue(sql, args...)
	for _, a := range p.after {
		b.Queue(a.sql, a.args...)
	}
	b.Queue("COMMIT")
	p.results = p.db.SendBatch(ctx, b)
	p.tx = p.results.Tx()
	if _, err := p.results.Exec(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	for _, a := range p.before {
		rows, err := p.results.Query()
		if err != nil {
			return err
		}
		if err := a.read(rows); err != nil {
			return err
		}
	}
	return nil
}

// close ends the batch (reading the answers of the statements behind fn's, and COMMIT's where
// it carried one) and returns its first error, the same on every call: the rows' Close calls
// it first (after the generated code has read their Err), and the transaction's end again,
// which must see a COMMIT that failed.
func (p *pipelined) close() error {
	if p.closed || p.results == nil {
		return p.closeErr
	}
	p.closed = true
	for _, a := range p.after {
		rows, err := p.results.Query()
		if err == nil {
			err = a.read(rows)
		}
		if err != nil {
			p.closeErr = err
			break
		}
	}
	if p.closeErr == nil {
		var tag pgconn.CommandTag
		if tag, p.closeErr = p.results.Exec(); p.closeErr == nil && tag.String() != "COMMIT" {
			p.closeErr = pgx.ErrTxCommitRollback // the transaction had failed: nothing committed
		}
	}
	if err := p.results.Close(); p.closeErr == nil {
		p.closeErr = err
	}
	return p.closeErr
}

func (p *pipelined) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := p.send(ctx, sql, args); err != nil {
		return nil, err
	}
	rows, err := p.results.Query()
	if err != nil {
		return nil, err
	}
	return &pipelinedRows{Rows: rows, p: p}, nil
}

// QueryRow is refused: the pipelined operations are :many statements, and a :one one would
// leave its batch open (nothing closes a pgx.Row).
func (p *pipelined) QueryRow(context.Context, string, ...any) pgx.Row {
	return errRow{errPipelinedRow}
}

func (p *pipelined) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := p.send(ctx, sql, args); err != nil {
		return pgconn.CommandTag{}, err
	}
	return p.results.Exec()
}

// pipelinedRows are the statement's rows; closing them ends the batch, so that the
// transaction's connection may be used again.
type pipelinedRows struct {
	pgx.Rows
	p   *pipelined
	err error
}

func (r *pipelinedRows) Close() {
	r.Rows.Close()
	if err := r.p.close(); err != nil && r.err == nil {
		r.err = err
	}
}

func (r *pipelinedRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// tryPipelined is tryTx for an fn of one statement, sent with BEGIN, the statements ahead and
// behind, and COMMIT in one batch.
func (l *Ledger) tryPipelined(ctx context.Context, db batchSender, opts pgx.TxOptions, before, after []ahead, fn func(q *dbsqlc.Queries) error) error {
	p := &pipelined{db: db, opts: opts, before: before, after: after}
	defer func() {
		_ = p.close()
		if p.tx != nil {
			// Releases the connection: a no-op rollback once committed.
			_ = p.tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	err := fn(dbsqlc.New(p))
	if cerr := p.close(); err == nil {
		err = cerr
	}
	return err
}

// sender is the ledger's DB as a batchSender, when it is one and nothing replaced how the
// ledger commits (a test injecting a failure at COMMIT gets one message at a time, as before).
func (l *Ledger) sender() (batchSender, bool) {
	if l.commitReplaced {
		return nil, false
	}
	s, ok := l.db.(batchSender)
	return s, ok
}

// inTxPipelined is inTx for an operation of one statement: pipelined where the DB can, with
// the statements ahead of it (their rows read before fn runs; each try reads them again) and
// behind it (read after fn's, before the commit).
func (l *Ledger) inTxPipelined(ctx context.Context, what string, before, after []ahead, fn func(q *dbsqlc.Queries) error) error {
	return l.pipelinedWith(ctx, what, pgx.TxOptions{IsoLevel: l.cfg.Isolation}, before, after, fn)
}

// inReadCommittedPipelined is inTxPipelined at READ COMMITTED whatever the ledger's isolation:
// for the outbox's bookkeeping, which guards nothing. The outbox is a small table whose rows
// come and go; a SERIALIZABLE read or delete of it may be planned as a sequential scan, which
// takes a predicate lock on the whole table and so conflicts with every writer appending to it.
func (l *Ledger) inReadCommittedPipelined(ctx context.Context, what string, before []ahead, fn func(q *dbsqlc.Queries) error) error {
	return l.pipelinedWith(ctx, what, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, before, nil, fn)
}

func (l *Ledger) pipelinedWith(ctx context.Context, what string, opts pgx.TxOptions, before, after []ahead, fn func(q *dbsqlc.Queries) error) error {
	if s, ok := l.sender(); ok {
		return l.retrying(ctx, what, func() error { return l.tryPipelined(ctx, s, opts, before, after, fn) })
	}
	return l.retrying(ctx, what, func() error {
		tx, err := l.db.BeginTx(ctx, opts)
		if err != nil {
			return fmt.Errorf("begin transaction: %w", err)
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if err := runAhead(ctx, tx, before); err != nil {
			return err
		}
		if err := fn(dbsqlc.New(tx)); err != nil {
			return err
		}
		if err := runAhead(ctx, tx, after); err != nil {
			return err
		}
		return l.commit(ctx, tx)
	})
}

// scanOne is scan for a read of one statement: BEGIN, the statements ahead, the statement and
// COMMIT in one round trip where the DB can.
func (l *Ledger) scanOne(ctx context.Context, what string, before []ahead, fn func(q *dbsqlc.Queries) error) error {
	s, ok := l.sender()
	if !ok {
		return l.scanAfter(ctx, what, before, fn)
	}
	if err := l.tryPipelined(ctx, s, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly}, before, nil, fn); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// readOne is inTx for a read of one statement of the hot path (GetMany, Gates) at the
// ledger's isolation, planned as hotPlans has it: BEGIN, the statement and COMMIT in one round
// trip where the DB can, restarted as inTx restarts.
func (l *Ledger) readOne(ctx context.Context, what string, fn func(q *dbsqlc.Queries) error) error {
	return l.pipelinedWith(ctx, what, pgx.TxOptions{IsoLevel: l.cfg.Isolation}, l.hotPlans(ctx), nil, fn)
}

// recorded is the statement and arguments fn sends, without sending them: what the generated
// code of a query sends, for a batch.
func recorded(fn func(q *dbsqlc.Queries) error) (string, []any) {
	var r recorder
	_ = fn(dbsqlc.New(&r))
	return r.sql, r.args
}

// recorder is a connection that keeps the one statement it is given and refuses it.
type recorder struct {
	sql  string
	args []any
}

var errRecorded = errors.New("ledger: recorded, not sent")

func (r *recorder) keep(sql string, args []any) { r.sql, r.args = sql, args }

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.keep(sql, args)
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.keep(sql, args)
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.keep(sql, args)
	return errRow{errRecorded}
}
