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

// ownerLedger is a ledger on a pool of one connection of the owner's, whose statistics and
// prepared statements a test reads, and on which it grows the tables: pg_stat_force_next_flush
// flushes that one backend's counts.
func (e *env) ownerLedger(t *testing.T) (*ledger.Ledger, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(e.db.URL)
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	l, err := ledger.New(pool, ledger.Config{Actor: "test", Isolation: e.iso})
	require.NoError(t, err)
	return l, pool
}

// Each hot operation of the pipeline is one statement, and goes to the server with its BEGIN
// (and the outbox's delayed delete) and its COMMIT in one batch: one round trip, a read or a
// write. Sent a message at a time, the same operations took three (a read) and three or four
// (a write) round trips; with a write's COMMIT sent after its rows were read, a write took two.
func TestTheHotOperationsAreOneRoundTripEach(t *testing.T) {
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
			for _, op := range []string{"submit", "begin", "authorize", "complete"} {
				want[op] = trip{0, 1} // BEGIN, the statements and COMMIT
			}
			if iso == pgx.Serializable {
				// At SERIALIZABLE ForgetLater deletes at once, in a transaction of its own: one
				// more batch before Authorize's.
				want["authorize"] = trip{0, 2}
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
// heap holds every row deleted since. Its statements (a read by key, the read behind a write
// of what the outbox held before it, a delete) go through its primary key all the same, never
// by a plan made while it was empty that reads the whole heap, and they run on the plans
// PostgreSQL cached after their first runs rather than being planned again at every call.
// (autovacuum is off where the tests run, so nothing vacuums it here.)
func TestTheOutboxIsReadByItsKeyWhateverItHeldWhenItsPlansWereMade(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	l, pool := e.ownerLedger(t)
	// The scans that read the whole outbox: its heap, or the index of its rows' ages (a read
	// of some intents' rows that went through it would read every row's entry).
	wholeScans := func() [2]int64 {
		t.Helper()
		_, err := pool.Exec(e.ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		var n [2]int64
		require.NoError(t, pool.QueryRow(e.ctx, `SELECT t.seq_scan, i.idx_scan FROM pg_stat_user_tables t, pg_stat_user_indexes i
			WHERE t.relname = 'outbox' AND i.indexrelname = 'outbox_created_at_idx'`).Scan(&n[0], &n[1]))
		return n
	}
	key := e.submit("read by key")
	round := func(text string) {
		t.Helper()
		rows, err := l.UnpublishedFor(e.ctx, []identity.DeliveryKey{key})
		require.NoError(t, err)
		require.Len(t, rows, 1)
		res, err := l.Submit(e.ctx, []identity.Envelope{envelope(t, account, text)})
		require.NoError(t, err)
		require.True(t, res[0].Outbox.Complete, "the write read what the outbox held before it")
		removed, err := l.Published(e.ctx, res[0].Outbox.Rows)
		require.NoError(t, err)
		require.Len(t, removed, 1)
	}
	// Analyzed empty, as autovacuum finds it; then ten rounds while it holds a row or two:
	// PostgreSQL caches a prepared statement's plan after five runs.
	e.exec(`ANALYZE outbox`)
	for i := range 10 {
		round(fmt.Sprintf("warm-up %d", i))
	}
	// Then 20,000 rows come and go, as a few seconds of a busy pipeline's do.
	// On the test's one connection, whose scans are then counted (flushed) before the
	// measured rounds, as another backend's might not be.
	_, err := pool.Exec(e.ctx, `INSERT INTO outbox (delivery_key, seq, dispatch)
		SELECT sha256(convert_to('churn ' || g, 'UTF8')), 1, false FROM generate_series(1, 20000) g`)
	require.NoError(t, err)
	_, err = pool.Exec(e.ctx, `DELETE FROM outbox WHERE delivery_key <> $1`, key.Bytes())
	require.NoError(t, err)

	before := wholeScans()
	for i := range 5 {
		round(fmt.Sprintf("measured %d", i))
	}
	require.Equal(t, before, wholeScans(), "no statement scanned the outbox's heap or its created_at index")

	rows, err := pool.Query(e.ctx, `SELECT substring(statement FROM '-- name: (\w+)'), generic_plans, custom_plans
		FROM pg_prepared_statements WHERE statement LIKE '-- name: Outbox%'`)
	require.NoError(t, err)
	plans := map[string][2]int64{}
	for rows.Next() {
		var name string
		var generic, custom int64
		require.NoError(t, rows.Scan(&name, &generic, &custom))
		plans[name] = [2]int64{generic, custom}
	}
	require.NoError(t, rows.Err())
	for _, name := range []string{"OutboxPendingFor", "OutboxEarlierFor", "OutboxDelete"} {
		require.Contains(t, plans, name)
		require.Positive(t, plans[name][0], "%s ran on its cached plan (generic, custom runs: %v)", name, plans[name])
	}
}

// A ledger's tables grow from nothing, and PostgreSQL caches a prepared statement's plan after
// its first five runs: made while the tables were small, a plan that read them whole stays
// when they are not (nothing analyzes them in between where autovacuum is off or behind). The
// hot path's statements (Submit, GetMany, Gates, Begin, Authorize, Complete) reach the
// intents and their attempts by key all the same once the ledger holds 20,000 of them.
func TestTheHotPathReadsByKeyWhateverTheLedgerHeldWhenItsPlansWereMade(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	l, pool := e.ownerLedger(t)
	// The sequential scans of the intents and of the attempts.
	seqScans := func() [2]int64 {
		t.Helper()
		_, err := pool.Exec(e.ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		var n [2]int64
		require.NoError(t, pool.QueryRow(e.ctx, `SELECT (SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'intents'),
			(SELECT seq_scan FROM pg_stat_user_tables WHERE relname = 'attempts')`).Scan(&n[0], &n[1]))
		return n
	}
	round := func(text string) {
		t.Helper()
		res, err := l.Submit(e.ctx, []identity.Envelope{envelope(t, account, text)})
		require.NoError(t, err)
		require.Equal(t, ledger.Created, res[0].Outcome)
		key := res[0].Key
		// Each write's rows published and their removal left to the next write (ForgetLater),
		// as the writers do: the removal ahead of a hot statement leaves it planned as the rest.
		require.NoError(t, l.ForgetLater(e.ctx, res[0].Outbox.Rows, nil))
		got, err := l.GetMany(e.ctx, []identity.DeliveryKey{key})
		require.NoError(t, err)
		require.Len(t, got, 1)
		_, err = l.Gates(e.ctx, []string{account})
		require.NoError(t, err)
		begun, err := l.BeginMany(e.ctx, []ledger.BeginRequest{{Key: key, RequestHash: requestHash(text)}}, lease)
		require.NoError(t, err)
		require.NoError(t, begun[0].Err)
		require.NoError(t, l.ForgetLater(e.ctx, begun[0].Outbox.Rows, nil))
		auth, err := l.AuthorizeMany(e.ctx, []ledger.Claim{begun[0].Claim}, inFlight, contract)
		require.NoError(t, err)
		require.NoError(t, auth[0].Err)
		require.True(t, auth[0].Authorization.Authorized(), "reason %s", auth[0].Authorization.Reason)
		require.NoError(t, l.ForgetLater(e.ctx, auth[0].Outbox.Rows, nil))
		done, err := l.CompleteMany(e.ctx, []ledger.Report{{Claim: begun[0].Claim, Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: "o-" + text, Confirmed: true}}})
		require.NoError(t, err)
		require.NoError(t, done[0].Err)
	}
	// Analyzed empty, as a new ledger is; then ten rounds while it holds a few intents.
	_, err := pool.Exec(e.ctx, `ANALYZE`)
	require.NoError(t, err)
	for i := range 10 {
		round(fmt.Sprintf("warm-up %d", i))
	}
	// Then the ledger grows to 20,000 published intents with their attempts, unanalyzed, on
	// the test's one connection: the scans the growth makes are then counted (flushed) before
	// the measured rounds, as another backend's might not be.
	grow := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(e.ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	grow(`INSERT INTO intents (delivery_key, account_id, action, request, text_hash, state, reason, transition_seq,
			attempts_authorized, attempt_token, epoch, generation, object_id)
		SELECT sha256(convert_to('grown ' || g, 'UTF8')), $1, 'post', '{"text":"grown ' || g || '"}',
			sha256(convert_to('grown text ' || g, 'UTF8')), 'published', 'published', 4,
			1, substring(sha256(convert_to('grown attempt ' || g, 'UTF8')) FROM 1 FOR 16), 1, nextval('attempt_generation'), 'obj-grown-' || g
		FROM generate_series(1, 20000) g`, account)
	grow(`INSERT INTO attempts (attempt_token, delivery_key, account_id, action, request_hash, credential_version, epoch, generation)
		SELECT attempt_token, delivery_key, account_id, action, text_hash, 1, epoch, generation FROM intents WHERE object_id LIKE 'obj-grown-%'`)

	before := seqScans()
	for i := range 5 {
		round(fmt.Sprintf("measured %d", i))
	}
	require.Equal(t, before, seqScans(), "no statement of the hot path scanned the intents or the attempts")
}

// Every statement of the hot path and of the outbox runs on the plan its connection made once,
// at any batch size: left to choose, PostgreSQL plans a statement anew for every call whose
// arguments, a batch of a few keys, make a plan of their own look cheaper than the generic
// one (at a batch of one it did so at every call of Gates, GetMany and the read behind each
// hot write). Batches of one and of several intents, at both isolations, on one connection,
// whose prepared statements then say how each run was planned.
func TestTheHotPathIsPlannedOnceAtAnyBatchSize(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			e := newEnvAt(t, iso)
			l, pool := e.ownerLedger(t)
			round := func(r, n int) {
				t.Helper()
				envs, texts := make([]identity.Envelope, n), make([]string, n)
				for i := range envs {
					texts[i] = fmt.Sprintf("round %d intent %d", r, i)
					envs[i] = envelope(t, account, texts[i])
				}
				res, err := l.Submit(e.ctx, envs)
				require.NoError(t, err)
				keys := make([]identity.DeliveryKey, n)
				reqs := make([]ledger.BeginRequest, n)
				for i, s := range res {
					require.Equal(t, ledger.Created, s.Outcome)
					keys[i] = s.Key
					reqs[i] = ledger.BeginRequest{Key: s.Key, RequestHash: requestHash(texts[i])}
				}
				// Published as the relays publish: the outbox read back by key, its rows
				// removed now (Published) or with the next write (ForgetLater).
				rows, err := l.UnpublishedFor(e.ctx, keys)
				require.NoError(t, err)
				_, err = l.Published(e.ctx, rows)
				require.NoError(t, err)
				got, err := l.GetMany(e.ctx, keys)
				require.NoError(t, err)
				require.Len(t, got, n)
				_, err = l.Gates(e.ctx, []string{account})
				require.NoError(t, err)
				begun, err := l.BeginMany(e.ctx, reqs, lease)
				require.NoError(t, err)
				claims := make([]ledger.Claim, n)
				for i, b := range begun {
					require.NoError(t, b.Err)
					claims[i] = b.Claim
					require.NoError(t, l.ForgetLater(e.ctx, b.Outbox.Rows, nil))
				}
				auth, err := l.AuthorizeMany(e.ctx, claims, inFlight, contract)
				require.NoError(t, err)
				reports := make([]ledger.Report, n)
				for i, a := range auth {
					require.NoError(t, a.Err)
					require.True(t, a.Authorization.Authorized(), "reason %s", a.Authorization.Reason)
					require.NoError(t, l.ForgetLater(e.ctx, a.Outbox.Rows, nil))
					reports[i] = ledger.Report{Claim: claims[i], Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: fmt.Sprintf("o-%d-%d", r, i), Confirmed: true}}
				}
				_, err = l.WitnessFor(e.ctx, claims)
				require.NoError(t, err)
				done, err := l.CompleteMany(e.ctx, reports)
				require.NoError(t, err)
				for _, d := range done {
					require.NoError(t, d.Err)
				}
				require.NoError(t, l.FlushForgotten(e.ctx))
				_, err = l.Unpublished(e.ctx, 100, 0) // the relay's slow path
				require.NoError(t, err)
			}
			// More rounds than the five runs after which PostgreSQL weighs a generic plan.
			for r := range 8 {
				round(r, []int{1, 3}[r%2])
			}
			hot := []string{"IntentSubmit", "IntentsGetMany", "DispatchGates", "IntentsBegin", "IntentsAuthorize", "IntentsComplete",
				"OutboxPending", "OutboxPendingFor", "OutboxWitnessFor", "OutboxDelete"}
			if iso == pgx.ReadCommitted {
				hot = append(hot, "OutboxEarlierFor")
			}
			requirePlannedOnce(t, e.ctx, pool, hot...)
		})
	}
}

// requirePlannedOnce fails unless every named statement ran on pool's one connection, on a
// generic plan each time: never planned for the arguments of a call (pg_prepared_statements).
func requirePlannedOnce(t *testing.T, ctx context.Context, pool *pgxpool.Pool, names ...string) {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT substring(statement FROM '-- name: (\w+)'), generic_plans, custom_plans
		FROM pg_prepared_statements WHERE statement LIKE '-- name: %'`)
	require.NoError(t, err)
	plans := map[string][2]int64{}
	for rows.Next() {
		var name string
		var generic, custom int64
		require.NoError(t, rows.Scan(&name, &generic, &custom))
		plans[name] = [2]int64{generic, custom}
	}
	require.NoError(t, rows.Err())
	for _, name := range names {
		require.Contains(t, plans, name)
		require.Positive(t, plans[name][0], "%s (generic, custom runs: %v)", name, plans[name])
		require.Zero(t, plans[name][1], "%s was planned for the arguments of a call (generic, custom runs: %v)", name, plans[name])
	}
}

// A reject replay runs Submit's statement on a connection the hot path shares, and caches its
// plan there: planned under other settings, the plan a replay made would be the one every
// Submit on that connection ran after it. Each replay of one reject plans as the hot path does.
func TestARejectReplayPlansSubmitAsTheHotPathDoes(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			e := newEnvAt(t, iso)
			l, pool := e.ownerLedger(t)
			// More replays than the five runs after which PostgreSQL weighs a generic plan.
			for i := range 7 {
				c := e.storeReject(account, fmt.Sprintf("replayed %d", i), int64(i+1))
				res := e.replay(l, ledger.ReplayOptions{Actor: "operator"}, c)
				require.Equal(t, ledger.ReplayCreated, res[0].Outcome)
			}
			requirePlannedOnce(t, e.ctx, pool, "IntentSubmit")
		})
	}
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

// failingCommit answers its commitAt-th Exec (BEGIN is the first) with err, or, where err is
// nil, with the command tag ROLLBACK, as the server answers the COMMIT of a transaction that
// had failed.
type failingCommit struct {
	pgx.BatchResults
	execs, commitAt int
	err             error
}

func (f *failingCommit) Exec() (pgconn.CommandTag, error) {
	f.execs++
	tag, err := f.BatchResults.Exec()
	switch {
	case f.execs != f.commitAt:
		return tag, err
	case f.err == nil:
		return pgconn.NewCommandTag("ROLLBACK"), err
	}
	return tag, f.err
}

// A pipelined transaction's COMMIT is read after its rows, when the generated code has
// returned them already: its failure still fails the operation, a read or a write.
func TestAPipelinedTransactionWhoseCommitFailsFails(t *testing.T) {
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
	_, err = l.Submit(e.ctx, []identity.Envelope{envelope(t, account, "written")})
	require.ErrorIs(t, err, injected)
	_, err = l.Begin(e.ctx, key, requestHash("read"), lease)
	require.ErrorIs(t, err, injected)

	// A COMMIT answered ROLLBACK ended a transaction that had failed: nothing committed.
	l, err = ledger.New(commitFails{Pool: e.app}, ledger.Config{Actor: "test", Isolation: pgx.ReadCommitted})
	require.NoError(t, err)
	_, err = l.Submit(e.ctx, []identity.Envelope{envelope(t, account, "rolled back")})
	require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
}
