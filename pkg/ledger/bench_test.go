package ledger_test

import (
	"context"
	"flag"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// benchEnv is a ledger for a benchmark: the application role, a pool big enough for the
// clients, no rate limit, and a cap that never parks.
func benchEnv(b *testing.B, clients int) (*env, *ledger.Ledger) {
	b.Helper()
	iso := pgx.Serializable
	if benchIsolation == "read-committed" {
		iso = pgx.ReadCommitted
	}
	db := dbtest.New(b)
	e := &env{t: b, ctx: context.Background(), db: db, pool: db.Pool, iso: iso}
	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ($1, 'sim')`, account)
	e.setPolicy("rate_per_minute", 0)
	cfg, err := pgxpool.ParseConfig(db.AppURL())
	require.NoError(b, err)
	cfg.MaxConns = int32(clients)
	app, err := pgxpool.NewWithConfig(e.ctx, cfg)
	require.NoError(b, err)
	b.Cleanup(app.Close)
	e.app = app
	// Restarts are measured, not fatal: SERIALIZABLE on PostgreSQL restarts often under load.
	return e, e.ledgerWith(ledger.Config{Actor: "bench", MaxRetries: 1000})
}

var benchSeq atomic.Int64

// benchIsolation picks the isolation level the benchmarks run at:
// go test -bench . ./pkg/ledger/ -args -isolation=read-committed
var benchIsolation = "serializable"

// benchBatch is the batch size of BenchmarkLifecycleBatch: -args -batch=N.
var benchBatch = 100

func init() {
	flag.IntVar(&benchBatch, "batch", benchBatch, "batch size of BenchmarkLifecycleBatch")
	flag.StringVar(&benchIsolation, "isolation", benchIsolation, "isolation level of the ledger benchmarks: serializable or read-committed")
}

// batch returns n new distinct post intents.
func batch(b *testing.B, n int) []identity.Envelope {
	out := make([]identity.Envelope, n)
	for i := range out {
		out[i] = envelope(b, account, fmt.Sprintf("bench %d %d", time.Now().UnixNano(), benchSeq.Add(1)))
	}
	return out
}

func (e *env) commits() int64 {
	var n int64
	require.NoError(e.t, e.pool.QueryRow(e.ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n))
	return n
}

func reportCommits(b *testing.B, e *env, before int64, intents int) {
	// The statistics collector reports with a delay; give it a moment.
	time.Sleep(600 * time.Millisecond)
	b.ReportMetric(float64(e.commits()-before)/float64(intents), "commits/intent")
}

// BenchmarkSubmitBatch100 stores batches of 100 new intents, one transaction each.
func BenchmarkSubmitBatch100(b *testing.B) {
	e, l := benchEnv(b, 4)
	batches := make([][]identity.Envelope, b.N)
	for i := range batches {
		batches[i] = batch(b, 100)
	}
	before := e.commits()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, err := l.Submit(e.ctx, batches[i])
		require.NoError(b, err)
	}
	b.StopTimer()
	b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "intents/s")
	reportCommits(b, e, before, 100*b.N)
}

// BenchmarkBeginAuthorize claims and authorizes submitted intents from 16 clients.
func BenchmarkBeginAuthorize(b *testing.B) {
	const clients = 16
	e, l := benchEnv(b, clients)
	keys := submitted(b, e, l, b.N)
	var next atomic.Int64
	before := e.commits()
	b.ResetTimer()
	b.SetParallelism(clients / max(1, runtimeProcs()))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := keys[next.Add(1)-1]
			c, err := l.Begin(e.ctx, key, requestHash("b"), lease)
			require.NoError(b, err)
			a, err := l.Authorize(e.ctx, c, inFlight, contract)
			require.NoError(b, err)
			require.True(b, a.Authorized())
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "intents/s")
	reportCommits(b, e, before, b.N)
	b.ReportMetric(float64(l.Retries())/float64(b.N), "restarts/intent")
}

// BenchmarkComplete records published outcomes for authorized intents from 16 clients. An ok
// from a serving account says nothing to its health: no report is written. unavailable records
// connection failures instead, each fed to the account's health (a transaction of its own after
// the completion's), and neutral the same failures with no report: the health report's cost is
// the difference between the two.
func BenchmarkComplete(b *testing.B) {
	for _, c := range []struct {
		name    string
		outcome ledger.Outcome
	}{
		{"ok", ledger.Outcome{Result: ledger.Sent, ObjectID: "obj", Confirmed: true}},
		{"unavailable", ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed}},
		// The same failed completions with no health report (the dispatcher's own not-sent).
		{"neutral", ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed, Signal: ledger.SignalNeutral}},
	} {
		b.Run(c.name, func(b *testing.B) { benchmarkComplete(b, c.outcome) })
	}
}

func benchmarkComplete(b *testing.B, outcome ledger.Outcome) {
	const clients = 16
	e, l := benchEnv(b, clients)
	keys := submitted(b, e, l, b.N)
	claims := make([]ledger.Claim, len(keys))
	for i, key := range keys {
		c, err := l.Begin(e.ctx, key, requestHash("b"), lease)
		require.NoError(b, err)
		_, err = l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(b, err)
		claims[i] = c
	}
	var next atomic.Int64
	before := e.commits()
	b.ResetTimer()
	b.SetParallelism(clients / max(1, runtimeProcs()))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c := claims[next.Add(1)-1]
			_, err := l.Complete(e.ctx, c, outcome)
			require.NoError(b, err)
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "intents/s")
	reportCommits(b, e, before, b.N)
}

// BenchmarkLifecycle is the whole ledger path of an intent from 16 clients: Submit in batches
// of 100, then Begin, Authorize and Complete for each.
func BenchmarkLifecycle(b *testing.B) {
	const clients = 16
	e, l := benchEnv(b, clients)
	// Every client may start one batch past b.N.
	envs := batch(b, ((b.N+99)/100)*100+clients*100)
	var next atomic.Int64
	before := e.commits()
	b.ResetTimer()
	b.SetParallelism(clients / max(1, runtimeProcs()))
	b.RunParallel(func(pb *testing.PB) {
		var queue []identity.DeliveryKey
		for pb.Next() {
			if len(queue) == 0 {
				start := int(next.Add(100) - 100)
				res, err := l.Submit(e.ctx, envs[start:start+100])
				require.NoError(b, err)
				for _, r := range res {
					queue = append(queue, r.Key)
				}
			}
			key := queue[0]
			queue = queue[1:]
			c, err := l.Begin(e.ctx, key, requestHash("b"), lease)
			require.NoError(b, err)
			_, err = l.Authorize(e.ctx, c, inFlight, contract)
			require.NoError(b, err)
			_, err = l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj", Confirmed: true})
			require.NoError(b, err)
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "intents/s")
	reportCommits(b, e, before, b.N)
	b.ReportMetric(float64(l.Retries())/float64(b.N), "restarts/intent")
}

func submitted(b *testing.B, e *env, l *ledger.Ledger, n int) []identity.DeliveryKey {
	b.Helper()
	var keys []identity.DeliveryKey
	for len(keys) < n {
		res, err := l.Submit(e.ctx, batch(b, min(100, n-len(keys))))
		require.NoError(b, err)
		for _, r := range res {
			keys = append(keys, r.Key)
		}
	}
	return keys
}

// BenchmarkLifecycleBatch is the whole ledger path in batches, as a dispatcher working
// -batch intents at a time runs it (default 100), from 8 clients: Submit, BeginMany,
// AuthorizeMany, CompleteMany.
func BenchmarkLifecycleBatch(b *testing.B) {
	const clients = 8
	size := benchBatch
	e, l := benchEnv(b, clients)
	envs := batch(b, ((b.N+size-1)/size)*size+clients*size)
	var next atomic.Int64
	var done atomic.Int64
	before := e.commits()
	b.ResetTimer()
	b.SetParallelism(clients / max(1, runtimeProcs()))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			start := int(next.Add(int64(size)) - int64(size))
			if start >= b.N {
				continue
			}
			res, err := l.Submit(e.ctx, envs[start:start+size])
			require.NoError(b, err)
			reqs := make([]ledger.BeginRequest, len(res))
			for i, r := range res {
				reqs[i] = ledger.BeginRequest{Key: r.Key, RequestHash: requestHash("b")}
			}
			begun, err := l.BeginMany(e.ctx, reqs, lease)
			require.NoError(b, err)
			claims := make([]ledger.Claim, len(begun))
			for i, r := range begun {
				require.NoError(b, r.Err)
				claims[i] = r.Claim
			}
			auth, err := l.AuthorizeMany(e.ctx, claims, inFlight, contract)
			require.NoError(b, err)
			reports := make([]ledger.Report, len(auth))
			for i, a := range auth {
				require.NoError(b, a.Err)
				reports[i] = ledger.Report{Claim: claims[i], Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: "obj", Confirmed: true}}
			}
			_, err = l.CompleteMany(e.ctx, reports)
			require.NoError(b, err)
			done.Add(int64(size))
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(done.Load())/b.Elapsed().Seconds(), "intents/s")
	reportCommits(b, e, before, int(done.Load()))
	b.ReportMetric(float64(l.Retries())/float64(done.Load()), "restarts/intent")
}
