package sweep_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/ledger"
)

// The ledger a sweeper benchmark runs over: 100,000 intents of 100 accounts in the mix a
// running system holds, built by set-based SQL (numbers are the n of generate_series; the
// delivery key of intent n is sha256('bench-' || n)).
const (
	benchIntents   = 100000
	benchPublished = 88000 // 1..88000: published; the work of the "work" passes is borrowed from here
	benchWorkBlock = 2000  // per work pass: 500 expired claims, 500 expired authorizations, 1,000 due retries
)

// benchFill holds the statements that fill the ledger. The default policy backs off 5 min (so
// the failed intents in the mix are not due while the benchmark runs) and limits retries to
// 60 a minute in bursts of 10 per account; ten accounts have a policy row of their own.
var benchFill = []string{
	`INSERT INTO accounts (account_id, platform) SELECT 'acct-' || lpad(a::TEXT, 2, '0'), 'sim' FROM generate_series(0, 99) a`,
	`UPDATE policies SET backoff_base_ms = 300000, backoff_max_ms = 3600000, rate_per_minute = 60, rate_burst = 10 WHERE scope = ''`,
	`INSERT INTO policies (scope, attempt_cap, updated_by) SELECT 'acct-' || lpad(a::TEXT, 2, '0'), 5, 'bench' FROM generate_series(0, 9) a`,
	// kind by range of n:
	//   published        1..88000      reason published, attempted once, up to 7 days old
	//   pending          88001..92000  submitted within the last 2 min, no claim (not stranded)
	//   claimed          92001..93000  pending with a live lease
	//   authorized       93001..94000  live lease
	//   failed, retried  94001..95000  connection_failed / rate_limited, inside their backoff
	//   failed, never    95001..97000  platform_rejected / credential_revoked (not retried), days old
	//   indeterminate    97001..97500  send_unknown, lookup claimed a minute ago
	//   indeterminate    97501..98500  lease_expired / send_unknown, no lookup yet, up to 1 h old
	//   parked           98501..100000
	`INSERT INTO intents (delivery_key, account_id, action, request, state, reason, transition_seq, attempts_authorized,
	                      attempt_token, epoch, generation, lease_expires_at, object_id, created_at, updated_at)
	 SELECT sha256(('bench-' || n)::BYTEA), 'acct-' || lpad((n % 100)::TEXT, 2, '0'), 'post', '{"text":"bench ' || n || '"}',
	        k.state, k.reasons[1 + n % cardinality(k.reasons)], k.seq, k.attempts + n % 2 * k.attempts_odd,
	        CASE WHEN k.seq > 1 THEN substr(sha256(('token-' || n)::BYTEA), 1, 16) END,
	        CASE WHEN k.seq > 1 THEN 1 END, CASE WHEN k.seq > 1 THEN n END,
	        CASE WHEN k.leased THEN now() + INTERVAL '1 hour' END, CASE WHEN k.state = 'published' THEN 'obj-' || n END,
	        now() - k.age - (n % k.spread) * INTERVAL '1 second' - INTERVAL '1 minute',
	        now() - k.age - (n % k.spread) * INTERVAL '1 second'
	 FROM generate_series(1, 100000) n
	 JOIN (VALUES
	     (1, 88000, 'published', ARRAY['published'], 4, 1, 0, false, INTERVAL '0', 604800),
	     (88001, 92000, 'pending', ARRAY['submitted'], 1, 0, 0, false, INTERVAL '0', 120),
	     (92001, 93000, 'pending', ARRAY['claimed'], 2, 0, 0, true, INTERVAL '0', 60),
	     (93001, 94000, 'authorized', ARRAY['authorized'], 3, 1, 0, true, INTERVAL '0', 60),
	     (94001, 95000, 'failed', ARRAY['connection_failed', 'rate_limited'], 4, 1, 1, false, INTERVAL '0', 30),
	     (95001, 97000, 'failed', ARRAY['platform_rejected', 'credential_revoked'], 4, 1, 0, false, INTERVAL '1 day', 604800),
	     (97001, 97500, 'indeterminate', ARRAY['send_unknown'], 4, 1, 0, false, INTERVAL '2 minutes', 1),
	     (97501, 98500, 'indeterminate', ARRAY['lease_expired', 'send_unknown'], 4, 1, 0, false, INTERVAL '0', 3600),
	     (98501, 100000, 'parked', ARRAY['attempts_exhausted', 'duplicate_text', 'reconcile_not_found', 'operator_parked'], 5, 1, 0, false, INTERVAL '0', 604800)
	 ) k (lo, hi, state, reasons, seq, attempts, attempts_odd, leased, age, spread) ON n BETWEEN k.lo AND k.hi`,
	// What the intents' pasts left: one attempt row for each attempt token, one history row
	// for each transition (the sweeper's inserts and the relay's lookups go through their
	// primary keys), and the lookups claimed for the 500 intents of 97001..97500.
	`INSERT INTO attempts (attempt_token, delivery_key, account_id, action, request_hash, credential_version, epoch, generation)
	 SELECT attempt_token, delivery_key, account_id, action, sha256(request::BYTEA), 1, epoch, generation
	 FROM intents WHERE attempt_token IS NOT NULL`,
	`INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, at)
	 SELECT i.delivery_key, s, CASE WHEN s > 1 THEN 'pending' END, CASE WHEN s = i.transition_seq THEN i.state ELSE 'pending' END,
	        CASE WHEN s = i.transition_seq THEN i.reason ELSE 'submitted' END, i.attempt_token, i.epoch, i.generation, 'bench',
	        i.updated_at - (i.transition_seq - s) * INTERVAL '1 second'
	 FROM intents i CROSS JOIN LATERAL generate_series(1, i.transition_seq) s`,
	`INSERT INTO reconciliations (attempt_token, step, delivery_key, actor, at)
	 SELECT attempt_token, 'claimed', delivery_key, 'bench-reconciler', now() - INTERVAL '1 minute' FROM attempts
	 WHERE generation BETWEEN 97001 AND 97500`,
	`VACUUM ANALYZE`,
}

// benchFixture is the 100,000-intent ledger and JetStream the sweeper benchmarks share.
type benchFixture struct {
	ctx   context.Context
	db    *dbtest.DB
	js    jetstream.JetStream
	setup *pgx.Conn // the owner's connection that prepares work
	stats *pgx.Conn // the owner's connection that reads the statistics
	block int       // the next block of published intents to turn into work
}

func newBenchFixture(b *testing.B) *benchFixture {
	b.Helper()
	ctx := context.Background()
	db := dbtest.New(b)
	srv := natstest.New(b)
	js := srv.Streams(b)
	f := &benchFixture{ctx: ctx, db: db, js: js}
	for _, c := range []**pgx.Conn{&f.setup, &f.stats} {
		conn, err := pgx.Connect(ctx, db.URL)
		require.NoError(b, err)
		b.Cleanup(func() { _ = conn.Close(context.Background()) })
		*c = conn
	}
	start := time.Now()
	for _, sql := range benchFill {
		_, err := f.setup.Exec(ctx, sql)
		require.NoError(b, err, sql)
	}
	var n int
	require.NoError(b, f.setup.QueryRow(ctx, `SELECT count(*) FROM intents`).Scan(&n))
	require.Equal(b, benchIntents, n)
	b.Logf("filled %d intents in %s", n, time.Since(start).Round(time.Millisecond))
	return f
}

// prepareWork restores the previous work block to published and turns the next one into
// 500 expired claims, 500 expired authorizations and 1,000 failed intents due for a retry
// (10 per account, each account's retry bucket full), then vacuums what the last pass left.
func (f *benchFixture) prepareWork(b *testing.B) {
	b.Helper()
	blocks := benchPublished / benchWorkBlock
	prev, cur := (f.block+blocks-1)%blocks*benchWorkBlock, f.block%blocks*benchWorkBlock
	f.block++
	keys := `SELECT sha256(('bench-' || n)::BYTEA) FROM generate_series($1::INT, $2::INT) n`
	for _, s := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE intents SET state = 'published', reason = 'published', lease_expires_at = NULL, updated_at = now() - INTERVAL '1 day'
		  WHERE delivery_key IN (` + keys + `) AND state <> 'published'`, []any{prev + 1, prev + benchWorkBlock}},
		{`UPDATE intents SET state = 'pending', reason = 'claimed', lease_expires_at = now() - INTERVAL '1 second', updated_at = now() - INTERVAL '1 minute'
		  WHERE delivery_key IN (` + keys + `)`, []any{cur + 1, cur + 500}},
		{`UPDATE intents SET state = 'authorized', reason = 'authorized', lease_expires_at = now() - INTERVAL '1 second', updated_at = now() - INTERVAL '1 minute'
		  WHERE delivery_key IN (` + keys + `)`, []any{cur + 501, cur + 1000}},
		{`UPDATE intents SET state = 'failed', reason = 'connection_failed', attempts_authorized = 1, lease_expires_at = NULL, updated_at = now() - INTERVAL '1 hour'
		  WHERE delivery_key IN (` + keys + `)`, []any{cur + 1001, cur + 2000}},
		{`DELETE FROM retry_buckets`, nil},
		{`VACUUM intents, outbox, retry_buckets`, nil},
	} {
		_, err := f.setup.Exec(f.ctx, s.sql, s.args...)
		require.NoError(b, err, s.sql)
	}
}

// benchStats reads what PostgreSQL counted for the database: blocks found in shared buffers
// (hit) or read from the kernel (read), and scans and blocks per table and index.
const benchStats = `
SELECT 'blks_hit', blks_hit FROM pg_stat_database WHERE datname = current_database()
UNION ALL SELECT 'blks_read', blks_read FROM pg_stat_database WHERE datname = current_database()
UNION ALL SELECT 'commits', xact_commit FROM pg_stat_database WHERE datname = current_database()
UNION ALL SELECT 'seq_scan ' || relname, seq_scan FROM pg_stat_user_tables
UNION ALL SELECT 'seq_tup_read ' || relname, seq_tup_read FROM pg_stat_user_tables
UNION ALL SELECT 'idx_scan ' || indexrelname, idx_scan FROM pg_stat_user_indexes
UNION ALL SELECT 'idx_tup_read ' || indexrelname, idx_tup_read FROM pg_stat_user_indexes
UNION ALL SELECT 'blks ' || CASE WHEN schemaname = 'public' THEN relname ELSE '(catalog)' END,
                 coalesce(heap_blks_hit, 0) + coalesce(heap_blks_read, 0) + coalesce(toast_blks_hit, 0) + coalesce(toast_blks_read, 0)
          FROM pg_statio_all_tables
UNION ALL SELECT 'blks ' || CASE WHEN schemaname = 'public' THEN indexrelname ELSE '(catalog)' END, coalesce(idx_blks_hit, 0) + coalesce(idx_blks_read, 0)
          FROM pg_statio_all_indexes`

// flush makes every connection of pool, and the fixture's own, hand its pending statistics
// over before it next goes idle (PostgreSQL otherwise does so at most once a second).
func (f *benchFixture) flush(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	for _, c := range pool.AcquireAllIdle(f.ctx) {
		_, err := c.Exec(f.ctx, `SELECT pg_stat_force_next_flush()`)
		c.Release()
		require.NoError(b, err)
	}
	_, err := f.setup.Exec(f.ctx, `SELECT pg_stat_force_next_flush()`)
	require.NoError(b, err)
}

func (f *benchFixture) read(b *testing.B) map[string]int64 {
	b.Helper()
	rows, err := f.stats.Query(f.ctx, benchStats)
	require.NoError(b, err)
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		require.NoError(b, rows.Scan(&k, &v))
		out[k] += v
	}
	require.NoError(b, rows.Err())
	// This connection's own reading is handed over now, between two measured windows.
	_, err = f.stats.Exec(f.ctx, `SELECT pg_stat_force_next_flush()`)
	require.NoError(b, err)
	return out
}

// counter counts the statements the sweeper sends, by sqlc query name (or first word).
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	name := strings.TrimSpace(d.SQL)
	if rest, ok := strings.CutPrefix(name, "-- name: "); ok {
		name, _, _ = strings.Cut(rest, " ")
	} else if i := strings.IndexAny(name, " \n("); i > 0 {
		name = strings.ToLower(name[:i])
	}
	c.mu.Lock()
	c.n[name]++
	c.mu.Unlock()
	return ctx
}

func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.n
	c.n = map[string]int{}
	return out
}

// BenchmarkSweepPass times Sweeper.Pass over a ledger of 100,000 intents, and counts what
// each pass costs the database: statements, blocks of shared buffers (hit: found in memory;
// read: fetched from the kernel) and sequential scans of intents (which must stay 0).
//
//   - idle: the common case, nothing to do: the scans find nothing and change nothing.
//   - work: each pass expires 500 claims and 500 authorizations and retries 1,000 failed
//     intents (10 for each of 100 accounts), publishing every transition; the preparation
//     between passes is not timed or counted.
//
// go test -run '^$' -bench SweepPass -benchtime 20x ./internal/role/sweep/
func BenchmarkSweepPass(b *testing.B) {
	f := newBenchFixture(b)
	b.Run("idle", func(b *testing.B) { f.bench(b, false) })
	b.Run("work", func(b *testing.B) { f.bench(b, true) })
}

func (f *benchFixture) bench(b *testing.B, work bool) {
	trace := &counter{n: map[string]int{}}
	cfg, err := pgxpool.ParseConfig(f.db.AppURL())
	require.NoError(b, err)
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(f.ctx, cfg)
	require.NoError(b, err)
	defer pool.Close()
	l, err := ledger.New(pool, ledger.Config{Actor: "bench-sweeper"})
	require.NoError(b, err)
	s, err := sweep.New(l, relay.New(l, f.js, relay.Config{Settle: -1}), f.js, sweep.Config{})
	require.NoError(b, err)
	// A sweeper runs pass after pass: the first one opens connections and warms caches.
	_, err = s.Pass(f.ctx)
	require.NoError(b, err)

	// Reading the statistics costs blocks too (the catalogs behind the views), counted in the
	// window after the reading: measured here with nothing else running, and taken off.
	f.flush(b, pool)
	f.read(b)
	r1 := f.read(b)
	own := f.read(b)
	for k, v := range r1 {
		own[k] -= v
	}

	var (
		took  time.Duration
		stmts = map[string]int{}
		delta = map[string]int64{}
	)
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		if work {
			f.prepareWork(b)
		}
		f.flush(b, pool)
		before := f.read(b)
		trace.take()
		b.StartTimer()
		start := time.Now()
		r, err := s.Pass(f.ctx)
		took += time.Since(start)
		b.StopTimer()
		require.NoError(b, err)
		for k, v := range trace.take() {
			stmts[k] += v
		}
		f.flush(b, pool)
		for k, v := range f.read(b) {
			delta[k] += v - before[k] - own[k]
		}
		if work {
			require.Equal(b, sweep.Report{Abandoned: 500, LeaseExpired: 500, Retried: 1000, Took: r.Took}, r)
		} else {
			require.Equal(b, sweep.Report{Took: r.Took}, r, "an idle pass changes nothing")
		}
	}
	n := float64(b.N)
	total := 0
	for _, v := range stmts {
		total += v
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(took.Microseconds())/1000/n, "ms/pass")
	b.ReportMetric(float64(total)/n, "stmts/pass")
	b.ReportMetric(float64(stmts["begin"])/n, "tx/pass")
	b.ReportMetric(float64(delta["blks_hit"])/n, "blks_hit/pass")
	b.ReportMetric(float64(delta["blks_read"])/n, "blks_read/pass")
	b.ReportMetric(float64(delta["seq_scan intents"])/n, "intents_seqscans/pass")

	var lines []string
	for _, k := range slices.Sorted(maps.Keys(stmts)) {
		lines = append(lines, fmt.Sprintf("  %-28s %8.1f statements/pass", k, float64(stmts[k])/n))
	}
	for _, k := range slices.Sorted(maps.Keys(delta)) {
		if delta[k] != 0 && k != "blks_hit" && k != "blks_read" && k != "commits" {
			lines = append(lines, fmt.Sprintf("  %-50s %10.1f /pass", k, float64(delta[k])/n))
		}
	}
	b.Logf("N=%d, %.2f ms/pass, %.1f blocks hit and %.1f read per pass:\n%s", b.N, float64(took.Microseconds())/1000/n,
		float64(delta["blks_hit"])/n, float64(delta["blks_read"])/n, strings.Join(lines, "\n"))
}
