package dispatch_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/testkit/benchtest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
	"github.com/atmost/atmost/pkg/tracecontext"
)

var (
	benchIsolation = flag.String("isolation", "serializable", "ledger isolation of the benchmarks: serializable or read-committed")
	benchPipelines = flag.Int("pipelines", 0, "dispatcher pipelines (0: the default)")
	benchBatch     = flag.Int("batch", 0, "dispatcher batch (0: the default)")
	benchPreload   = flag.Int("preload", 100000, "published intents already in the ledger, with their history, attempts and evidence, analyzed, as in a ledger that has been running for a while (0: a new, empty ledger)")
	benchProfile   = flag.String("window-cpuprofile", "", "write a CPU profile of the measured window only (not the set-up or the commit probe) to this file")
	benchTraced    = flag.Bool("traced", false, "the producer puts a W3C traceparent on every intent; with no exporter anywhere this measures the trace context's own cost (stored, relayed, continued)")
	benchProcess   = flag.Bool("dispatcher-process", true, "run the dispatcher role in a process of its own, as in production, and report its peak memory alone (false: in the benchmark's process, where one CPU profile sees the whole pipeline)")
)

// BenchmarkEndToEnd publishes b.N intents to ATMOST_INTENTS while one ingester (in this
// process) and one dispatcher (the role, in a child process; -dispatcher-process=false: in this
// one) run against the platform simulator (in this process), and reports intents/s from the
// first ingest commit to the last publication, the p50 and p99 latency from ingest (the
// intent's creation) to published, ledger commits per intent, the CPU each side spent, this
// process's memory obtained from the OS (Go's Sys) and the dispatcher process's peak resident
// memory.
func BenchmarkEndToEnd(b *testing.B) {
	for _, latency := range []time.Duration{0, 50 * time.Millisecond} {
		b.Run(fmt.Sprintf("platform-latency=%s", latency), func(b *testing.B) { benchEndToEnd(b, latency) })
	}
}

func benchEndToEnd(b *testing.B, latency time.Duration) {
	role.TuneGC() // as every role does at start
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	iso := pgx.Serializable
	if *benchIsolation == "read-committed" {
		iso = pgx.ReadCommitted
	}
	db := dbtest.New(b)
	newLedger := func(actor string) *ledger.Ledger {
		l, err := ledger.New(db.AppPool(b), ledger.Config{Actor: actor, Isolation: iso})
		require.NoError(b, err)
		return l
	}
	l := newLedger("bench")
	s, err := platformsim.New(platformsim.Config{Latency: latency})
	require.NoError(b, err)
	simURL, _, err := s.Serve(ctx, "127.0.0.1:0")
	require.NoError(b, err)
	require.NoError(b, l.AddAccount(ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, simURL))}, "test", "a test account"))
	if b.N >= 100 { // the testing package's first, one-intent run only finds the code path
		preload(b, ctx, db.Pool, *benchPreload)
	}
	unlimited := 0
	_, err = l.SetPolicy(ctx, "acct-1", ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, "bench", "no rate limit in the benchmark")
	require.NoError(b, err)
	srv := natstest.New(b)
	nc := srv.Connect(b)
	js, err := jetstream.New(nc)
	require.NoError(b, err)
	require.NoError(b, streams.Ensure(ctx, nc, js, streams.Config{}))
	// The producer has a connection of its own, as producers do: its burst of asynchronous
	// publishes must not fill the roles' publish window.
	producer, err := jetstream.New(srv.Connect(b), jetstream.WithPublishAsyncMaxPending(4096))
	require.NoError(b, err)

	// The ingest role's loop: a batch, then its own transitions published at once.
	il := newLedger("ingest")
	in, err := ingest.New(ctx, js, il, ingest.Config{Batch: 500, MaxWait: 20 * time.Millisecond})
	require.NoError(b, err)
	irel := relay.New(il, js, relay.Config{RemoveLater: true}) // as the ingest role's
	go func() {
		for ctx.Err() == nil {
			if _, keys, err := in.BatchKeys(ctx); err == nil && len(keys) > 0 {
				_ = irel.PublishFor(ctx, keys)
			}
		}
	}()
	dl := newLedger("dispatcher")
	var child *dispatcherProcess
	if *benchProcess && b.N >= 100 {
		child = startDispatcher(b, db.AppURL(), srv.URL)
	} else {
		d, err := dispatch.New(ctx, js, dl, relay.New(dl, js, relay.Config{RemoveLater: true}), dispatch.Config{Platforms: platform.Registry{sim.Name: sim.Open}, Pipelines: *benchPipelines, Batch: *benchBatch})
		require.NoError(b, err)
		go func() { _ = d.Run(ctx) }()
	}

	var peak atomic.Uint64
	go func() {
		var m runtime.MemStats
		for ctx.Err() == nil {
			runtime.ReadMemStats(&m)
			if m.Sys > peak.Load() {
				peak.Store(m.Sys)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	// The measured intents are those created from here on (the preloaded ones are older).
	var since time.Time
	require.NoError(b, db.Pool.QueryRow(ctx, `SELECT now()`).Scan(&since))
	var before int64
	require.NoError(b, db.Pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&before))
	walBefore := walPosition(b, ctx, db.Pool)

	if *benchProfile != "" {
		f, err := os.Create(*benchProfile)
		require.NoError(b, err)
		defer f.Close()
		require.NoError(b, pprof.StartCPUProfile(f))
	}
	selfBefore, _ := benchtest.CPUTimes()
	pgBefore := benchtest.ServerCPU(ctx, db.Pool)
	var childBefore time.Duration
	if child != nil {
		childBefore = benchtest.ProcessCPU(child.pid())
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body := fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":"end to end %d"}}`, i)
		msg := &nats.Msg{Subject: events.IntentSubject("acct-1"), Data: []byte(body)}
		if *benchTraced {
			msg.Header = nats.Header{tracecontext.Header: []string{fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)}}
		}
		_, err := producer.PublishMsgAsync(msg)
		require.NoError(b, err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	// The platform's count is read in this process for free; the ledger is asked only once
	// every object exists, so the benchmark's own polling does not scan intents under load.
	for s.ObjectCount() < b.N && time.Now().Before(deadline) {
		child.alive(b)
		time.Sleep(10 * time.Millisecond)
	}
	for {
		var published int
		// The pool is SERIALIZABLE: a read may be chosen as a serialization victim; it is
		// simply asked again.
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM intents WHERE state = 'published' AND account_id = 'acct-1' AND created_at >= $1`, since).Scan(&published); err == nil && published == b.N {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d published after 10 minutes", published, b.N)
		}
		child.alive(b)
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	selfAfter, _ := benchtest.CPUTimes()
	pgAfter := benchtest.ServerCPU(ctx, db.Pool)
	if child != nil {
		childCPU := benchtest.ProcessCPU(child.pid()) - childBefore
		selfAfter += childCPU
		b.ReportMetric(float64(childCPU)/float64(time.Millisecond)/float64(b.N), "dispatcher-cpu-ms/intent")
	}
	if *benchProfile != "" {
		pprof.StopCPUProfile()
	}

	var after int64
	require.NoError(b, db.Pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&after))
	walAfter := walPosition(b, ctx, db.Pool)
	var seconds, p50, p99 float64
	require.NoError(b, db.Pool.QueryRow(ctx, `
		SELECT extract(epoch FROM max(h.at) - min(i.created_at))::FLOAT8,
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM h.at - i.created_at))::FLOAT8,
		       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM h.at - i.created_at))::FLOAT8
		FROM intents i JOIN history h ON h.delivery_key = i.delivery_key AND h.to_state = 'published'
		WHERE i.created_at >= $1`, since).Scan(&seconds, &p50, &p99))
	b.ReportMetric(float64(b.N)/seconds, "intents/s")
	b.ReportMetric(p50*1000, "p50-ms")
	b.ReportMetric(p99*1000, "p99-ms")
	b.ReportMetric(float64(after-before)/float64(b.N), "commits/intent")
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-MB")
	restarts := il.Retries() + dl.Retries()
	if child != nil {
		b.ReportMetric(float64(benchtest.PeakResident(child.pid()))/(1<<20), "dispatcher-peak-MB")
		restarts += child.restarts(b)
	}
	b.ReportMetric(float64(restarts)/float64(b.N), "restarts/intent")
	b.ReportMetric(float64(selfAfter-selfBefore)/float64(time.Millisecond)/float64(b.N), "go-cpu-ms/intent")
	if pgAfter > pgBefore {
		b.ReportMetric(float64(pgAfter-pgBefore)/float64(time.Millisecond)/float64(b.N), "pg-cpu-ms/intent")
	}
	// The write-ahead log of the window, from the log's insert position (exact, unlike
	// pg_stat_wal, which backends update at most once a second). The preload ends with a
	// CHECKPOINT, so the window is the start of a checkpoint cycle, where the first change to
	// each page logs the whole page (8 kB): pg_stat_wal showed about 1.7 full pages per intent
	// on a 100,000-intent ledger, most of the bytes. Measured once without that CHECKPOINT (no
	// full pages, a third of the bytes), throughput and CPU per intent did not improve: the full
	// pages cost write bandwidth here, not the CPU the two cores lack.
	b.ReportMetric(float64(walAfter-walBefore)/1024/float64(b.N), "wal-kB/intent")
	c := s.Counts()
	if c.GroupedReads > 0 {
		b.ReportMetric(float64(b.N)/float64(c.GroupedReads), "intents/grouped-read")
	}
	require.LessOrEqual(b, c.MaxCreatedPerKey, 1, "never two objects for one key")
	require.Equal(b, b.N, c.Objects)

	// PostgreSQL's own ceiling on this machine, measured in the same run: single-row insert
	// commits from as many connections as the roles above held (a pool of 4 each), so the
	// ratio of atmost's commit rate to the database's is visible.
	if b.N < 100 {
		return
	}
	ceiling := benchtest.CommitCeiling(b, ctx, db.Pool, 4, 3*time.Second)
	commitsPerSecond := float64(after-before) / seconds
	b.ReportMetric(ceiling, "pg-commits/s")
	b.ReportMetric(commitsPerSecond, "commits/s")
	b.ReportMetric(commitsPerSecond/ceiling, "of-pg-ceiling")
}

// dispatcherProcess is the dispatcher role running in a child of the benchmark's process.
type dispatcherProcess struct {
	cmd  *exec.Cmd
	out  *lockedBuffer
	addr string
	done chan error // receives cmd.Wait's result once
	over bool       // that result was taken: the process has ended
}

func (p *dispatcherProcess) pid() int { return p.cmd.Process.Pid }

// alive fails the benchmark when the process has ended (a nil p is the in-process dispatcher).
func (p *dispatcherProcess) alive(b *testing.B) {
	b.Helper()
	if p == nil {
		return
	}
	select {
	case err := <-p.done:
		p.over = true
		b.Fatalf("the dispatcher process ended during the run (%v):\n%s", err, p.out)
	default:
	}
}

var metricsClient = &http.Client{Timeout: 5 * time.Second}

// restarts reads the process's atmost_ledger_transaction_restarts_total from its /metrics.
func (p *dispatcherProcess) restarts(b *testing.B) uint64 {
	b.Helper()
	resp, err := metricsClient.Get("http://" + p.addr + "/metrics")
	require.NoError(b, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b, err)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "atmost_ledger_transaction_restarts_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			require.NoError(b, err, line)
			return uint64(n)
		}
	}
	b.Fatalf("the dispatcher process's /metrics has no atmost_ledger_transaction_restarts_total")
	return 0
}

// startDispatcher runs this test binary again as the dispatcher role (TestBenchDispatcher), on
// the given ledger and broker, with the benchmark's isolation, pipelines and batch, and waits
// until it serves /readyz on the port it bound (its start-up log line names it). The test's end
// stops it with SIGTERM, as an orchestrator would. The child's environment holds no ATMOST_
// variable but those set here, so a shell's settings configure neither dispatcher.
func startDispatcher(b *testing.B, dbURL, natsURL string) *dispatcherProcess {
	b.Helper()
	args := []string{"--http", "127.0.0.1:0", "--isolation", *benchIsolation}
	if *benchPipelines > 0 {
		args = append(args, "--pipelines", fmt.Sprint(*benchPipelines))
	}
	if *benchBatch > 0 {
		args = append(args, "--batch", fmt.Sprint(*benchBatch))
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBenchDispatcher$")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ATMOST_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "ATMOST_BENCH_DISPATCHER="+strings.Join(args, " "),
		"ATMOST_DATABASE_URL="+dbURL, "ATMOST_NATS_URL="+natsURL)
	cmd.SysProcAttr = childAttrs()
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(b, cmd.Start())
	p := &dispatcherProcess{cmd: cmd, out: out, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	b.Cleanup(func() {
		if p.over {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-p.done:
			if err != nil {
				b.Errorf("the dispatcher process ended with %v:\n%s", err, out)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			b.Errorf("the dispatcher process did not stop within 30 s of SIGTERM:\n%s", out)
		}
	})
	ready := func() bool {
		if p.addr == "" {
			p.addr, _ = roletest.HTTPAddr(out.String()) // the port the child bound, once it says
		}
		if p.addr == "" {
			return false
		}
		resp, err := metricsClient.Get("http://" + p.addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for deadline := time.Now().Add(30 * time.Second); !ready(); time.Sleep(20 * time.Millisecond) {
		p.alive(b)
		if time.Now().After(deadline) {
			b.Fatalf("the dispatcher process was not ready within 30 s:\n%s", out)
		}
	}
	return p
}

// TestBenchDispatcher is the dispatcher role of BenchmarkEndToEnd's child process: the
// benchmark runs this test binary again with ATMOST_BENCH_DISPATCHER set to the role's
// arguments. Run any other way it does nothing.
func TestBenchDispatcher(t *testing.T) {
	args, ok := os.LookupEnv("ATMOST_BENCH_DISPATCHER")
	if !ok {
		return // not the child
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if code := dispatch.Main(ctx, strings.Fields(args), os.LookupEnv, os.Stderr); code != 0 {
		t.Fatalf("the dispatcher role exited with %d", code)
	}
}

// walPosition is the write-ahead log's insert position, in bytes from its start.
func walPosition(b *testing.B, ctx context.Context, pool *pgxpool.Pool) int64 {
	b.Helper()
	var pos int64
	require.NoError(b, pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::BIGINT`).Scan(&pos))
	return pos
}

// preload writes n published intents of acct-1 straight into the ledger's tables, with the
// rows their way there left (four history rows, an attempt, its evidence, a text claim), then
// vacuums and analyzes every table and checkpoints: the ledger of a deployment that has been
// running, whose planner statistics describe tables of this size and whose autovacuum has
// caught up. A brand-new ledger's tables grow from nothing during the run, faster than
// autovacuum analyzes them, which measures a moment no deployment stays in for long.
func preload(b *testing.B, ctx context.Context, pool *pgxpool.Pool, n int) {
	b.Helper()
	if n == 0 {
		return
	}
	// One connection throughout: the preload table is temporary, seen only by the session
	// that made it.
	conn, err := pool.Acquire(ctx)
	require.NoError(b, err)
	defer conn.Release()
	for _, q := range []string{
		`CREATE TEMP TABLE preload AS
		 SELECT g, sha256(convert_to('preload ' || g, 'UTF8')) AS k,
		        substring(sha256(convert_to('preload attempt ' || g, 'UTF8')) FROM 1 FOR 16) AS tok,
		        sha256(convert_to('preload text ' || g, 'UTF8')) AS th,
		        nextval('attempt_generation') AS gen,
		        now() - (($1::INT - g) * INTERVAL '10 milliseconds') - INTERVAL '1 hour' AS at
		 FROM generate_series(1, $1::INT) g`,
		`INSERT INTO intents (delivery_key, account_id, action, request, text_hash, state, reason, transition_seq,
		                     attempts_authorized, attempt_token, epoch, generation, object_id, created_at, updated_at)
		 SELECT k, 'acct-1', 'post', '{"text":"preload ' || g || '"}', th, 'published', 'published', 4,
		        1, tok, 1, gen, 'obj-preload-' || g, at, at FROM preload`,
		`INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, at)
		 SELECT k, s.seq, s.f, s.t, s.r, CASE WHEN s.seq > 1 THEN tok END, CASE WHEN s.seq > 1 THEN 1 END,
		        CASE WHEN s.seq > 1 THEN gen END, 'preload', at
		 FROM preload CROSS JOIN (VALUES (1, NULL, 'pending', 'submitted'), (2, 'pending', 'pending', 'claimed'),
		      (3, 'pending', 'authorized', 'authorized'), (4, 'authorized', 'published', 'published')) AS s(seq, f, t, r)`,
		`INSERT INTO attempts (attempt_token, delivery_key, account_id, action, request_hash, credential_version, epoch, generation, created_at)
		 SELECT tok, k, 'acct-1', 'post', th, 1, 1, gen, at FROM preload`,
		`INSERT INTO attempt_evidence (attempt_token, delivery_key, epoch, generation, outcome, reason, object_id, fenced, recorded_at)
		 SELECT tok, k, 1, gen, 'success', 'published', 'obj-preload-' || g, false, at FROM preload`,
		`INSERT INTO text_claims (account_id, text_hash, delivery_key, last_at) SELECT 'acct-1', th, k, at FROM preload`,
		`DROP TABLE preload`,
		`VACUUM (ANALYZE)`,
		`CHECKPOINT`,
	} {
		var err error
		if strings.Contains(q, "$1") {
			_, err = conn.Exec(ctx, q, n)
		} else {
			_, err = conn.Exec(ctx, q)
		}
		require.NoError(b, err, q)
	}
}
