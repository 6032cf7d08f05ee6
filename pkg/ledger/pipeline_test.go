package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// trips counts what a pool's connections send the server: a query on its own and a batch are
// a round trip each.
type trips struct {
	mu               sync.Mutex
	queries, batches int
}

func (c *trips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queries++
	return ctx
}

func (c *trips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *trips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches++
	return ctx
}

func (c *trips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *trips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// take returns the round trips since the last take.
func (c *trips) take() (queries, batches int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	queries, batches = c.queries, c.batches
	c.queries, c.batches = 0, 0
	return queries, batches
}

// tracedLedger is a ledger on a pool of one connection of its own, whose round trips are
// counted.
func (e *env) tracedLedger(t *testing.T) (*ledger.Ledger, *pgxpool.Pool, *trips) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(e.db.AppURL())
	require.NoError(t, err)
	counter := &trips{}
	cfg.ConnConfig.Tracer = counter
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := ledger.New(pool, ledger.Config{Actor: "test", Isolation: e.iso})
	require.NoError(t, err)
	return l, pool, counter
}

// Each hot operation of the pipeline is one statement, and goes to the server with its BEGIN
// (and the outbox's delayed delete) in one batch: a read is that one round trip, COMMIT
// included; a write has its COMMIT follow. Sent a message at a time, the same operations took
// three (a read) and three or four (a write) round trips.
func TestTheHotOperationsAreOneRoundTripAndAWritesCommitOneMore(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			e := newEnvAt(t, iso)
			l, _, counter := e.tracedLedger(t)
			type trip struct{ queries, batches int }
			lifecycle := func(text string) map[string]trip {
				got := map[string]trip{}
				note := func(op string) {
					q, b := counter.take()
					got[op] = trip{q, b}
				}
				counter.take()
				res, err := l.Submit(e.ctx, []identity.Envelope{envelope(t, account, text)})
				require.NoError(t, err)
				note("submit")
				key := res[0].Key
				_, err = l.GetMany(e.ctx, []identity.DeliveryKey{key})
				require.NoError(t, err)
				note("get")
				_, err = l.Gates(e.ctx, []string{account})
				require.NoError(t, err)
				note("gates")
				c, err := l.Begin(e.ctx, key, requestHash(text), lease)
				require.NoError(t, err)
				note("begin")
				rows, err := l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
				require.NoError(t, err)
				note("outbox")
				// What a writer's relay does with what JetStream acknowledged: its next write
				// carries the delete.
				require.NoError(t, l.ForgetLater(e.ctx, rows, func([]ledger.Unpublished) {}))
				a, err := l.Authorize(e.ctx, c, inFlight, contract)
				require.NoError(t, err)
				require.Equal(t, ledger.Authorized, a.State)
				note("authorize")
				_, err = l.WitnessFor(e.ctx, []ledger.Claim{c})
				require.NoError(t, err)
				note("witness")
				_, err = l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "o-" + text, Confirmed: true})
				require.NoError(t, err)
				note("complete")
				return got
			}
			lifecycle("warm up") // prepares every statement on the one connection
			got := lifecycle("measured")
			want := map[string]trip{"get": {0, 1}, "gates": {0, 1}, "outbox": {0, 1}, "witness": {0, 1}}
			if iso == pgx.ReadCommitted {
				for _, op := range []string{"submit", "begin", "authorize", "complete"} {
					want[op] = trip{1, 1} // the batch, then COMMIT
				}
			} else {
				// At SERIALIZABLE ForgetLater deletes at once, in a transaction of its own: one
				// more batch and COMMIT before Authorize's.
				for _, op := range []string{"submit", "begin", "complete"} {
					want[op] = trip{1, 1}
				}
				want["authorize"] = trip{2, 2}
			}
			require.Equal(t, want, got)
		})
	}
}

// A statement the server refuses inside a pipelined transaction rolls the transaction back and
// leaves the connection as it found it: the next operation runs on the same connection.
func TestARefusedPipelinedStatementLeavesTheConnectionUsable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, pool, _ := e.tracedLedger(t)
	e.exec(`ALTER TABLE history ADD CONSTRAINT pipeline_test_refuses CHECK (false) NOT VALID`)
	_, err := l.Submit(e.ctx, []identity.Envelope{envelope(t, account, "refused")})
	require.ErrorContains(t, err, "pipeline_test_refuses")
	var n int
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT count(*) FROM intents`).Scan(&n))
	require.Zero(t, n, "nothing of the refused statement committed")

	e.exec(`ALTER TABLE history DROP CONSTRAINT pipeline_test_refuses`)
	for i := range 3 {
		res, err := l.Submit(e.ctx, []identity.Envelope{envelope(t, account, fmt.Sprintf("accepted %d", i))})
		require.NoError(t, err)
		require.Equal(t, ledger.Created, res[0].Outcome)
	}
	require.EqualValues(t, 1, pool.Stat().NewConnsCount(), "the one connection served every operation")
}

// The outbox is a queue: nearly empty whenever a plan is made, and between two vacuums its
// heap holds every row deleted since. Its reads go through its primary key all the same,
// planned for the table as it is at each call, never by a plan cached while it was empty that
// reads the whole heap. (autovacuum is off where the tests run, so nothing vacuums it here.)
func TestTheOutboxIsReadByItsKeyWhateverItHeldWhenItsPlansWereMade(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	// One connection of the owner's, whose statistics this test flushes and reads itself.
	cfg, err := pgxpool.ParseConfig(e.db.URL)
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := ledger.New(pool, ledger.Config{Actor: "test", Isolation: pgx.ReadCommitted})
	require.NoError(t, err)
	seqScans := func() int64 {
		t.Helper()
		_, err := pool.Exec(e.ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		var n int64
		require.NoError(t, pool.QueryRow(e.ctx, `SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'outbox'`).Scan(&n))
		return n
	}
	// Analyzed empty, as autovacuum finds it; then ten reads while it holds one row:
	// PostgreSQL caches a prepared statement's plan after five.
	e.exec(`ANALYZE outbox`)
	key := e.submit("read by key")
	for range 10 {
		rows, err := l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
		require.NoError(t, err)
		require.Len(t, rows, 1)
	}
	// Then 20,000 rows come and go, as a few seconds of a busy pipeline's do.
	e.exec(`INSERT INTO outbox (delivery_key, seq, dispatch)
		SELECT sha256(convert_to('churn ' || g, 'UTF8')), 1, false FROM generate_series(1, 20000) g`)
	e.exec(`DELETE FROM outbox WHERE delivery_key <> $1`, key.Bytes())

	before := seqScans()
	for range 5 {
		rows, err := l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
		require.NoError(t, err)
		require.Len(t, rows, 1)
	}
	require.Equal(t, before, seqScans(), "no read scanned the outbox's heap")
}

// commitFails is a pool whose pipelined reads have their COMMIT fail: the batch's last
// result, read after the statement's rows.
type commitFails struct {
	*pgxpool.Pool
	err error
}

func (c commitFails) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	br := c.Pool.SendBatch(ctx, b)
	last := b.QueuedQueries[len(b.QueuedQueries)-1].SQL
	if last != "COMMIT" {
		return br
	}
	return &failingCommit{BatchResults: br, execs: 0, commitAt: 2, err: c.err}
}

// failingCommit answers its commitAt-th Exec (BEGIN is the first) with err.
type failingCommit struct {
	pgx.BatchResults
	execs, commitAt int
	err             error
}

func (f *failingCommit) Exec() (pgconn.CommandTag, error) {
	f.execs++
	tag, err := f.BatchResults.Exec()
	if f.execs == f.commitAt {
		return tag, f.err
	}
	return tag, err
}

// A pipelined read's COMMIT is read after its rows, when the generated code has returned them
// already: its failure still fails the read.
func TestAPipelinedReadWhoseCommitFailsFails(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	key := e.submit("read")
	injected := errors.New("injected: the COMMIT failed")
	l, err := ledger.New(commitFails{Pool: e.app, err: injected}, ledger.Config{Actor: "test", Isolation: pgx.ReadCommitted})
	require.NoError(t, err)
	_, err = l.GetMany(e.ctx, []identity.DeliveryKey{key})
	require.ErrorIs(t, err, injected)
	_, err = l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
	require.ErrorIs(t, err, injected)
}
