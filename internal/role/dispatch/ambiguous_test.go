package dispatch_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// An ambiguous COMMIT of Authorize (CockroachDB's 40003, or a connection lost during COMMIT)
// may have authorized the attempt. The dispatcher must not send, and it must not authorize the
// intent again: it records what it knows, that nothing left (the claim's token is only in its
// memory, and it never reached the witness or the send), and the fence of Complete makes that
// a no-op where Authorize did not commit. Here Authorize did commit: the attempt ends failed,
// connection_failed at step authorize, and it counted against the cap
// (docs/cockroachdb.md#what-the-roles-do-with-an-ambiguous-commit).
func TestAnAmbiguousAuthorizeSendsNothingAndEndsTheAttemptNotSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	key := e.Submit("acct-1", "authorized, and the answer lost")[0]
	db := e.ambiguous(map[string]commitFault{"IntentsAuthorize": committedOnce})
	e.runOn(db, e.config())

	in := e.settle([]identity.DeliveryKey{key}, 20*time.Second)[key]
	e.drained() // the work item came back, found the intent failed and was acknowledged
	require.Zero(t, e.sim.Counts().Requests, "not a byte to the platform")
	require.Equal(t, ledger.Failed, in.State)
	require.Equal(t, ledger.ReasonConnectionFailed, in.Reason)
	require.Equal(t, 1, in.AttemptsAuthorized, "the authorization committed and counts")
	rec, err := e.Ledger.Inspect(e.Ctx, key)
	require.NoError(t, err)
	require.Len(t, rec.Evidence, 1, "one report: the dispatcher's not-sent")
	require.False(t, rec.Evidence[0].Fenced, "the not-sent report closed the authorization")
	require.Contains(t, string(rec.Evidence[0].Detail), `"step": "authorize"`)
	require.Equal(t, 1, db.commits("IntentsAuthorize"), "authorized once, never again")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM attempts WHERE delivery_key = $1`, key.Bytes()))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND to_state = 'authorized'`, key.Bytes()))
}

// The same ambiguous Authorize, and the ledger then out of reach for the not-sent report (its
// COMMIT ambiguous too, and this time not committed): the intent stays authorized, its work item
// is acknowledged when it comes back (not pending), nothing is sent, and once the in-flight
// lease has run out the sweeper moves the intent to indeterminate, for its one lookup.
func TestAnAmbiguousAuthorizeLeftAuthorizedEndsIndeterminateByTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	key := e.Submit("acct-1", "authorized, and nothing recorded after")[0]
	db := e.ambiguous(map[string]commitFault{"IntentsAuthorize": committedOnce, "IntentsComplete": rolledBack})
	e.runOn(db, e.config())

	require.Eventually(t, func() bool { return db.commits("IntentsComplete") > 0 }, 20*time.Second, 20*time.Millisecond,
		"the dispatcher never tried to record that nothing was sent")
	e.drained()
	in := e.Intent(key)
	require.Equal(t, ledger.Authorized, in.State)
	require.NotNil(t, in.LeaseExpiresAt)

	sweeper, err := sweep.New(e.Ledger, e.Relay, e.JS, sweep.Config{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := sweeper.Pass(e.Ctx)
		require.NoError(t, err)
		return e.Intent(key).State != ledger.Authorized
	}, 3*ledger.MinLease, 100*time.Millisecond, "the in-flight lease never expired")
	in = e.Intent(key)
	require.Equal(t, ledger.Indeterminate, in.State)
	require.Equal(t, ledger.ReasonLeaseExpired, in.Reason)
	require.Equal(t, 1, in.AttemptsAuthorized)
	require.Zero(t, e.sim.Counts().Requests, "not a byte to the platform")
	require.Equal(t, 1, db.commits("IntentsAuthorize"), "authorized once, never again")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND to_state = 'authorized'`, key.Bytes()))
}

// An ambiguous COMMIT of Complete after a real send that did commit: the dispatcher records the
// outcome again, the ledger answers that this very report had landed (no fenced evidence of a
// newer attempt that does not exist), and the intent stays published with its one object.
func TestAnAmbiguousCompleteIsRecordedAgainAndAnsweredAsItLanded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	key := e.Submit("acct-1", "published, and the answer lost")[0]
	db := e.ambiguous(map[string]commitFault{"IntentsComplete": committedOnce})
	e.runOn(db, e.config())

	in := e.settle([]identity.DeliveryKey{key}, 20*time.Second)[key]
	require.Equal(t, ledger.Published, in.State)
	e.drained()
	require.Equal(t, 1, e.sim.Received(key.String()))
	require.Equal(t, 1, e.sim.Created(key.String()))
	require.Equal(t, 2, db.commits("IntentsComplete"), "recorded again after the ambiguous commit")
	require.Zero(t, e.Count(`SELECT count(*) FROM attempt_evidence WHERE delivery_key = $1 AND fenced`, key.Bytes()), "no newer attempt fenced it")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM attempt_evidence WHERE delivery_key = $1`, key.Bytes()))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND to_state = 'published'`, key.Bytes()))
}

// An ambiguous COMMIT of Begin that did commit: the dispatcher, which minted the attempt tokens,
// reads which claims are its own and goes on with them at once. Left to their lease, each
// would have been closed as abandoned by the next Begin and a second attempt opened.
func TestAnAmbiguousBeginGoesOnWithTheClaimsThatLanded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.Submit("acct-1", "claimed, and the answer lost", "claimed beside it", "and a third")
	db := e.ambiguous(map[string]commitFault{"IntentsBegin": committedOnce})
	e.runOn(db, e.config())

	intents := e.settle(keys, 20*time.Second)
	e.drained()
	for _, k := range keys {
		require.Equal(t, ledger.Published, intents[k].State, "%s", k)
		require.Equal(t, 1, e.sim.Created(k.String()))
		require.Equal(t, 1, e.Count(`SELECT count(*) FROM attempts WHERE delivery_key = $1`, k.Bytes()), "one attempt: the claim that landed")
	}
	require.Zero(t, e.Count(`SELECT count(*) FROM attempt_evidence WHERE outcome = 'abandoned'`), "no claim was left to its lease")
	e.EventsMatchHistory()
}

// commitFault is what an injected COMMIT does, given how many COMMITs of that statement came
// before: whether the transaction commits, and whether its answer is the ambiguous result.
type commitFault func(before int) (commits, ambiguous bool)

// statementCompletionUnknown is CockroachDB's ambiguous result.
var statementCompletionUnknown = &pgconn.PgError{Code: "40003", Message: "result is ambiguous (injected)"}

// committedOnce commits, and the first time reports the ambiguous result instead of success.
func committedOnce(before int) (bool, bool) { return true, before == 0 }

// rolledBack never commits, and reports the ambiguous result.
func rolledBack(int) (bool, bool) { return false, true }

// ambiguousDB is the dispatcher's connection to the ledger, with the COMMIT of every
// transaction that ran one of the named statements (sqlc names each: "-- name: X") replaced by
// its fault. The ledger code between the dispatcher and the database is the real one, its
// transaction helper included.
type ambiguousDB struct {
	ledger.DB
	faults map[string]commitFault
	mu     sync.Mutex
	count  map[string]int
}

func (e *env) ambiguous(faults map[string]commitFault) *ambiguousDB {
	return &ambiguousDB{DB: e.DB.AppPool(e.T), faults: faults, count: map[string]int{}}
}

// commits is how many transactions of the statement reached their COMMIT.
func (d *ambiguousDB) commits(statement string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.count[statement]
}

func (d *ambiguousDB) BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error) {
	tx, err := d.DB.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &ambiguousTx{Tx: tx, db: d}, nil
}

// SendBatch is the ledger's pipelined transaction (BEGIN, its statements and COMMIT in one
// batch), its COMMIT faulted as BeginTx's are: one that must not commit is sent as ROLLBACK,
// and the answer read for it is the fault's.
func (d *ambiguousDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	sender := d.DB.(interface {
		SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
	})
	tx := &ambiguousTx{db: d}
	for _, q := range b.QueuedQueries {
		tx.note(q.SQL)
	}
	last := len(b.QueuedQueries) - 1
	if tx.statement == "" || last < 0 || b.QueuedQueries[last].SQL != "COMMIT" {
		return sender.SendBatch(ctx, b)
	}
	commits, ambiguous := tx.fault()
	if !commits {
		b.QueuedQueries[last].SQL = "ROLLBACK"
	}
	br := sender.SendBatch(ctx, b)
	return &ambiguousBatch{BatchResults: br, commitAt: last + 1, ambiguous: ambiguous}
}

// ambiguousBatch answers its COMMIT (the commitAt-th result; BEGIN is the first) with the
// ambiguous result where its fault says so.
type ambiguousBatch struct {
	pgx.BatchResults
	read, commitAt int
	ambiguous      bool
}

func (b *ambiguousBatch) Exec() (pgconn.CommandTag, error) {
	b.read++
	tag, err := b.BatchResults.Exec()
	if b.read == b.commitAt && err == nil && b.ambiguous {
		return tag, statementCompletionUnknown
	}
	return tag, err
}

func (b *ambiguousBatch) Query() (pgx.Rows, error) {
	b.read++
	return b.BatchResults.Query()
}

func (b *ambiguousBatch) QueryRow() pgx.Row {
	b.read++
	return b.BatchResults.QueryRow()
}

type ambiguousTx struct {
	pgx.Tx
	db        *ambiguousDB
	statement string // the first faulted statement this transaction ran
}

func (t *ambiguousTx) note(sql string) {
	if t.statement != "" {
		return
	}
	for name := range t.db.faults {
		if strings.HasPrefix(sql, "-- name: "+name+" ") {
			t.statement = name
		}
	}
}

func (t *ambiguousTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	t.note(sql)
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *ambiguousTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	t.note(sql)
	return t.Tx.Query(ctx, sql, args...)
}

func (t *ambiguousTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	t.note(sql)
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *ambiguousTx) Commit(ctx context.Context) error {
	if t.statement == "" {
		return t.Tx.Commit(ctx)
	}
	commits, ambiguous := t.fault()
	var err error
	if commits {
		err = t.Tx.Commit(ctx)
	} else {
		_ = t.Tx.Rollback(ctx)
	}
	if err == nil && ambiguous {
		err = statementCompletionUnknown
	}
	return err
}

// fault is what the fault of t's statement does to this COMMIT of it, counted.
func (t *ambiguousTx) fault() (commits, ambiguous bool) {
	t.db.mu.Lock()
	before := t.db.count[t.statement]
	t.db.count[t.statement]++
	t.db.mu.Unlock()
	return t.db.faults[t.statement](before)
}

// runOn starts a dispatcher whose ledger runs on db, until the test ends.
func (e *env) runOn(db ledger.DB, cfg dispatch.Config) {
	e.T.Helper()
	l, err := ledger.New(db, ledger.Config{Actor: "dispatcher"})
	require.NoError(e.T, err)
	d, err := dispatch.New(e.Ctx, e.JS, l, e.Relay, cfg)
	require.NoError(e.T, err)
	e.Run(d.Run)
}
