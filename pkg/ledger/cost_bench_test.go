package ledger_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// BenchmarkPipelineCost takes batches of -batch intents (default 100; the dispatcher's batch
// is 128) through the ledger calls one intent costs in the pipeline, in the order the roles
// make them, on ONE connection: ingest's Submit and the publication of its transitions, then
// the dispatcher's GetMany, Gates, BeginMany, the claims' publication, AuthorizeMany, the
// witness, CompleteMany and the outcomes' publication. A publication is what the roles'
// relays make of what the writes named (ledger.Written, then ForgetLater, as with RemoveLater):
// it reads back only the intents the writes could not name all of (UnpublishedFor; the
// witness WitnessFor), none at READ COMMITTED and all of them at SERIALIZABLE. It reports, per
// intent, the CPU time the connection's PostgreSQL backend spent in each step (from
// /proc/PID/schedstat, in nanoseconds: CPU, not wall time, so a machine busy with other work
// changes it far less than it changes a rate), the statements sent (BEGIN and COMMIT
// included) and the round trips they took (a pipelined batch is one). Before the measured batches, 2,000 intents go the same way and
// the tables are analyzed: the plans are those of a ledger that has been running, not of empty
// tables (-args -cost-analyze=false: not analyzed, a new ledger on a server whose autovacuum
// has not come by). Needs a local PostgreSQL (the backend's /proc entry); elsewhere it reports
// the statements only.
func BenchmarkPipelineCost(b *testing.B) {
	e, _ := benchEnv(b, 1)
	var statements, trips atomic.Int64
	pool, pid := oneBackend(b, e, countingTracer{&statements, &trips})
	iso := pgx.Serializable
	if benchIsolation == "read-committed" {
		iso = pgx.ReadCommitted
	}
	l, err := ledger.New(pool, ledger.Config{Actor: "bench", Isolation: iso})
	require.NoError(b, err)
	// Every removal rides on the next write, as under load: a removal of its own, made when no
	// write came within ForgetDelay, would land in whatever step was being measured then.
	ledger.SetForgetDelay(l, time.Hour)

	size := benchBatch
	steps := []string{"submit", "submit-read", "submit-forget", "get", "gates", "begin", "claims-read", "claims-forget", "authorize", "witness-read", "witness-forget", "complete", "complete-read", "complete-forget"}
	cpu := make(map[string]time.Duration, len(steps))
	var sent, tripped int64
	measure := false
	step := func(name string, fn func()) {
		s0, t0, c0 := statements.Load(), trips.Load(), backendCPU(pid)
		fn()
		if measure {
			cpu[name] += backendCPU(pid) - c0
			sent += statements.Load() - s0
			tripped += trips.Load() - t0
		}
	}
	lifecycle := func(n int) {
		envs := batch(b, n)
		var keys []identity.DeliveryKey
		var written ledger.Written
		step("submit", func() {
			res, err := l.Submit(e.ctx, envs)
			require.NoError(b, err)
			for _, r := range res {
				keys = append(keys, r.Key)
				written.Add(r.Key, r.Outbox)
			}
		})
		// A publication as the roles' relays make it (relay.Relay.PublishWritten): what the
		// write named, and, of the intents it could not name all of (SERIALIZABLE), what the
		// outbox holds, read after the commit.
		publish := func(name string, read func() ([]ledger.Unpublished, error)) {
			rows := written.Rows
			step(name+"-read", func() {
				if len(written.Unread) > 0 {
					more, err := read()
					require.NoError(b, err)
					rows = append(rows, more...)
				}
			})
			step(name+"-forget", func() { require.NoError(b, l.ForgetLater(e.ctx, rows, nil)) })
			written = ledger.Written{}
		}
		unpublished := func() ([]ledger.Unpublished, error) { return l.UnpublishedFor(e.ctx, written.Unread) }
		publish("submit", unpublished)
		step("get", func() {
			got, err := l.GetMany(e.ctx, keys)
			require.NoError(b, err)
			require.Len(b, got, len(keys))
		})
		step("gates", func() {
			_, err := l.Gates(e.ctx, []string{account})
			require.NoError(b, err)
		})
		reqs := make([]ledger.BeginRequest, len(keys))
		for i, k := range keys {
			reqs[i] = ledger.BeginRequest{Key: k, RequestHash: requestHash("b")}
		}
		claims := make([]ledger.Claim, len(keys))
		step("begin", func() {
			begun, err := l.BeginMany(e.ctx, reqs, lease)
			require.NoError(b, err)
			for i, r := range begun {
				require.NoError(b, r.Err)
				claims[i] = r.Claim
				written.Add(r.Claim.Key, r.Outbox)
			}
		})
		publish("claims", unpublished)
		step("authorize", func() {
			auth, err := l.AuthorizeMany(e.ctx, claims, inFlight, contract)
			require.NoError(b, err)
			for i, a := range auth {
				require.NoError(b, a.Err)
				require.True(b, a.Authorization.Authorized(), a.Authorization.Reason)
				written.Add(claims[i].Key, a.Outbox)
			}
		})
		publish("witness", func() ([]ledger.Unpublished, error) { return l.WitnessFor(e.ctx, claims) })
		reports := make([]ledger.Report, len(claims))
		for i, c := range claims {
			reports[i] = ledger.Report{Claim: c, Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: "obj", Confirmed: true, WitnessSeq: uint64(i + 1)}}
		}
		step("complete", func() {
			done, err := l.CompleteMany(e.ctx, reports)
			require.NoError(b, err)
			for i, d := range done {
				written.Add(claims[i].Key, d.Outbox)
			}
		})
		publish("complete", unpublished)
	}
	for range 2000 / size {
		lifecycle(size)
	}
	if costAnalyze {
		e.exec(`ANALYZE`)
	}
	measure = true
	b.ResetTimer()
	done := 0
	for done < b.N {
		lifecycle(size)
		done += size
	}
	b.StopTimer()
	var total time.Duration
	for _, s := range steps {
		total += cpu[s]
		b.ReportMetric(float64(cpu[s].Microseconds())/float64(done), s+"-pg-us/intent")
	}
	b.ReportMetric(float64(total.Microseconds())/float64(done), "pg-us/intent")
	b.ReportMetric(float64(sent)/float64(done)*float64(size), fmt.Sprintf("statements/%d-intents", size))
	b.ReportMetric(float64(tripped)/float64(done)*float64(size), fmt.Sprintf("round-trips/%d-intents", size))
}

// costAnalyze: BenchmarkPipelineCost analyzes the ledger before it measures.
var costAnalyze = true

func init() {
	flag.BoolVar(&costAnalyze, "cost-analyze", costAnalyze, "BenchmarkPipelineCost analyzes the ledger after its warm-up (false: a new ledger's plans)")
}

// oneBackend is a pool of one connection to e's ledger as the application role, traced by
// tracer when it is not nil, and the process ID of its PostgreSQL backend, whose CPU the cost
// benchmarks read (backendCPU).
func oneBackend(b *testing.B, e *env, tracer pgx.QueryTracer) (*pgxpool.Pool, int) {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(e.db.AppURL())
	require.NoError(b, err)
	cfg.MaxConns, cfg.MinConns = 1, 1
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	var pid int
	require.NoError(b, pool.QueryRow(e.ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	return pool, pid
}

// backendCPU is the CPU time process pid has run so far, from /proc/PID/schedstat
// (nanoseconds); zero where that is not readable.
func backendCPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0
	}
	ns, _ := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
	return time.Duration(ns)
}

// countingTracer counts the statements a connection sends, BEGIN and COMMIT included, and
// the round trips: a statement alone is one, a pipelined batch (SendBatch) one for all of its
// statements, which pgx traces as a batch and not as queries.
type countingTracer struct{ statements, trips *atomic.Int64 }

func (t countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	t.statements.Add(1)
	t.trips.Add(1)
	return ctx
}

func (countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (t countingTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.trips.Add(1)
	return ctx
}

func (t countingTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {
	t.statements.Add(1)
}

func (countingTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
