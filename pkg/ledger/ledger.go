package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// MinLease is the shortest lease Begin and Authorize accept. Leases must stay far above the
// database cluster's maximum clock offset (CockroachDB: 500 ms by default), and the ledger
// counts them in milliseconds.
const MinLease = 5 * time.Second

// DB is the connection the ledger runs on: a *pgxpool.Pool in production.
type DB interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Config tunes a Ledger. The zero value of every field means its default.
type Config struct {
	// Actor is written to history (and to reconciliation steps) as the author of the
	// transitions this Ledger makes for a process: the roles pass "<role>/<instance>"
	// (docs/design.md#who-acted). Operators' changes name the operator instead. Default "atmost".
	Actor string
	// Isolation of every transaction. Default pgx.Serializable. The guards are correct at
	// READ COMMITTED too; the concurrency suite runs at both.
	Isolation pgx.TxIsoLevel
	// MaxRetries bounds how often one operation restarts its transaction after a
	// serialization failure (40001) or a deadlock (40P01). Default DefaultMaxRetries.
	MaxRetries int
	// RetryBackoff is the first pause before a restart; it doubles with each restart, with
	// full jitter, up to MaxRetryBackoff. Defaults DefaultRetryBackoff and DefaultMaxRetryBackoff.
	RetryBackoff    time.Duration
	MaxRetryBackoff time.Duration
	// Logger receives a debug line per restart. Nil means no logging.
	Logger *zap.Logger
}

// The defaults of the configuration's fields (the zero value of a field means its default).
const (
	DefaultMaxRetries      = 10
	DefaultRetryBackoff    = 2 * time.Millisecond
	DefaultMaxRetryBackoff = 250 * time.Millisecond
)

func (c Config) withDefaults() Config {
	if c.Actor == "" {
		c.Actor = "atmost"
	}
	if c.Isolation == "" {
		c.Isolation = pgx.Serializable
	}
	c.MaxRetries = cmp.Or(c.MaxRetries, DefaultMaxRetries)
	c.RetryBackoff = cmp.Or(c.RetryBackoff, DefaultRetryBackoff)
	c.MaxRetryBackoff = cmp.Or(c.MaxRetryBackoff, DefaultMaxRetryBackoff)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

func (c Config) validate() error {
	switch c.Isolation {
	case pgx.Serializable, pgx.RepeatableRead, pgx.ReadCommitted:
	default:
		return fmt.Errorf("ledger: isolation %q is not serializable, repeatable read or read committed", c.Isolation)
	}
	if c.MaxRetries < 0 || c.RetryBackoff < 0 || c.MaxRetryBackoff < c.RetryBackoff {
		return errors.New("ledger: retry settings must be non-negative, and MaxRetryBackoff at least RetryBackoff")
	}
	return nil
}

// Ledger runs the state machine's operations on a database migrated by atmost migrate. It is
// safe for concurrent use by any number of goroutines and processes.
type Ledger struct {
	db      DB
	cfg     Config
	log     *zap.Logger
	retries atomic.Uint64
	forget  forgetting

	// commit ends a transaction; tests replace it to inject failures at COMMIT (and
	// commitReplaced then says so: such a ledger pipelines nothing, see sender).
	commit         func(ctx context.Context, tx pgx.Tx) error
	commitReplaced bool
	// dialect is whether the database is PostgreSQL, once asked (isPostgres).
	dialect struct {
		sync.Mutex
		known, postgres bool
	}
	// now overrides the database clock where a test must stand exactly on an edge; nil
	// (always, outside tests) means the database's now().
	now func() *time.Time
	// browseWindow is BrowseWindow, but smaller where a test walks the window's edge on a few
	// rows.
	browseWindow int
}

func (l *Ledger) clock() *time.Time {
	if l.now == nil {
		return nil
	}
	return l.now()
}

// New returns a Ledger on db.
func New(db DB, cfg Config) (*Ledger, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Ledger{
		db:           db,
		cfg:          cfg,
		log:          cfg.Logger.Named("ledger"),
		commit:       func(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) },
		browseWindow: BrowseWindow,
	}, nil
}

// Retries returns how many times a transaction was restarted after a serialization failure
// or deadlock since the Ledger was made.
func (l *Ledger) Retries() uint64 { return l.retries.Load() }

// ErrRetriesExhausted wraps the last serialization failure of an operation that was
// restarted Config.MaxRetries times without committing.
var ErrRetriesExhausted = errors.New("ledger: transaction restarted too often")

// inTx runs fn in one transaction and commits it; what names the work in errors and logs. On a serialization failure or deadlock,
// from any statement or from COMMIT itself, it rolls back and restarts the WHOLE transaction
// after a jittered pause: fn must therefore have no effect outside the database (no publish,
// no ack, no HTTP) and must not keep state between runs.
func (l *Ledger) inTx(ctx context.Context, what string, fn func(q *dbsqlc.Queries) error) error {
	return l.inTxWith(ctx, what, pgx.TxOptions{IsoLevel: l.cfg.Isolation}, fn)
}

// snapshot runs fn, a read of several statements, on one consistent snapshot that nothing
// else can make fail: REPEATABLE READ, READ ONLY. A SERIALIZABLE read may be chosen as the
// victim of conflicts among the writers (or of PostgreSQL's summary of old predicate locks
// under load) and abort ten times over; a snapshot guards nothing, so it needs none of that.
func (l *Ledger) snapshot(ctx context.Context, what string, fn func(q *dbsqlc.Queries) error) error {
	return l.inTxWith(ctx, what, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func (l *Ledger) inTxWith(ctx context.Context, what string, opts pgx.TxOptions, fn func(q *dbsqlc.Queries) error) error {
	return l.retrying(ctx, what, func() error { return l.tryTx(ctx, opts, nil, fn) })
}

// inTxAfter is inTx with the statements before run first, in the same transaction: a write
// of several statements that runs a hot statement (a reject replay's Submit), which must be
// planned as the hot path plans it. A prepared statement's plan is cached on its connection
// and the pool shares connections, so a plan made under other settings would be the one the
// hot path then runs.
func (l *Ledger) inTxAfter(ctx context.Context, what string, before []ahead, fn func(q *dbsqlc.Queries) error) error {
	opts := pgx.TxOptions{IsoLevel: l.cfg.Isolation}
	return l.retrying(ctx, what, func() error { return l.tryTx(ctx, opts, before, fn) })
}

// retrying runs try, one try of a whole transaction, again after a serialization failure or
// deadlock (see inTx).
func (l *Ledger) retrying(ctx context.Context, what string, try func() error) error {
	backoff := l.cfg.RetryBackoff
	for restart := 0; ; restart++ {
		err := try()
		if err == nil || !restartable(err) {
			return err
		}
		if restart >= l.cfg.MaxRetries {
			return fmt.Errorf("%s: %w after %d restarts: %w", what, ErrRetriesExhausted, restart, err)
		}
		l.retries.Add(1)
		l.log.Debug("transaction restarted", zap.String("op", what), zap.Int("restart", restart+1), zap.Error(err))
		if err := sleep(ctx, jitter(backoff)); err != nil {
			return err
		}
		backoff = min(2*backoff, l.cfg.MaxRetryBackoff)
	}
}

func (l *Ledger) tryTx(ctx context.Context, opts pgx.TxOptions, before []ahead, fn func(q *dbsqlc.Queries) error) error {
	tx, err := l.db.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	// A no-op once committed; after a failure it releases the connection cleanly even when
	// ctx is already cancelled.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := runAhead(ctx, tx, before); err != nil {
		return err
	}
	if err := fn(dbsqlc.New(tx)); err != nil {
		return err
	}
	return l.commit(ctx, tx)
}

// restartable reports whether err means the transaction lost a race and may simply run again:
// serialization_failure (40001) or deadlock_detected (40P01), both of which roll it back. Never
// what may have committed: CockroachDB's ambiguous result (40003, statement_completion_unknown)
// or a connection lost during COMMIT is returned as it is, neither a refusal nor
// ErrRetriesExhausted, and the caller must treat it as possibly committed
// (docs/cockroachdb.md#retries-and-ambiguous-commits).
func restartable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
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

// scan runs fn in a read-only READ COMMITTED transaction: the search for candidates. It takes
// no predicate locks, so under SERIALIZABLE a sweep over intents_sweep_idx never aborts the
// dispatchers' transitions; correctness rests on the guarded change that follows, never on
// what the scan saw.
func (l *Ledger) scan(ctx context.Context, what string, fn func(q *dbsqlc.Queries) error) error {
	return l.scanAfter(ctx, what, nil, fn)
}

// scanAfter is scan with the statements before run first, in the same transaction.
func (l *Ledger) scanAfter(ctx context.Context, what string, before []ahead, fn func(q *dbsqlc.Queries) error) error {
	tx, err := l.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("%s: begin transaction: %w", what, err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := runAhead(ctx, tx, before); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := fn(dbsqlc.New(tx)); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return tx.Commit(ctx)
}
