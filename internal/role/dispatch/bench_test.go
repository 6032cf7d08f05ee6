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
	"sort"
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
	benchPool      = flag.String("dispatchers", "1", "dispatcher processes on the one ledger and consumer, a comma-separated list: one sub-benchmark each (make bench-pool: 1,2,4)")
	benchConc      = flag.Int("concurrency", 0, "each dispatcher's intents worked at once, sends in flight included (0: the default)")
	benchAccounts  = flag.Int("accounts", 1, "accounts the intents are spread over, in turn")
	benchRate      = flag.Int("rate", 0, "each account's rate limit a minute, its burst as large (0: unlimited, no rate bucket is written); a rate far above the run's makes every Authorize take tokens from each account's bucket row without ever refusing")
)

// BenchmarkEndToEnd publishes b.N intents to ATMOST_INTENTS while one ingester (in this
// process) and one or more dispatchers (the role, each in a child process of its own sharing
// one consumer; -dispatcher-process=false: in this one) run against the platform simulator (in
// this process), and reports intents/s from the first ingest commit to the last publication,
// the p50 and p99 latency from ingest (the intent's creation) to published, ledger commits per
// intent, the conflicts per intent (transaction restarts, lost leases, work items handled
// again), the CPU each side spent and the machine's busy share, the lock waits seen in the
// database, this process's memory obtained from the OS (Go's Sys) and the dispatcher
// processes' peak resident memory.
func BenchmarkEndToEnd(b *testing.B) {
	var pool []int
	for _, f := range strings.Split(*benchPool, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "-dispatchers %q", *benchPool)
		require.Positive(b, n, "-dispatchers %q", *benchPool)
		pool = append(pool, n)
	}
	for _, latency := range []time.Duration{0, 50 * time.Millisecond} {
		b.Run(fmt.Sprintf("platform-latency=%s", latency), func(b *testing.B) {
			if len(pool) == 1 && pool[0] == 1 {
				benchEndToEnd(b, latency, 1) // the names of make bench's runs stay as they were
				return
			}
			for _, n := range pool {
				b.Run(fmt.Sprintf("dispatchers=%d", n), func(b *testing.B) { benchEndToEnd(b, latency, n) })
			}
		})
	}
}

// account is the benchmark's i-th account (of -accounts).
func account(i int) string { return fmt.Sprintf("acct-%d", i%*benchAccounts+1) }

func benchEndToEnd(b *testing.B, latency time.Duration, dispatchers int) {
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
	require.Positive(b, *benchAccounts, "-accounts")
	rate := ledger.PolicyOverride{RatePerMinute: benchRate, RateBurst: benchRate}
	if *benchRate == 0 {
		rate.RateBurst = nil
	}
	for a := range *benchAccounts {
		id := account(a)
		require.NoError(b, l.AddAccount(ctx, ledger.Account{ID: id, Platform: sim.Name, Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, simURL))}, ledger.Actor{Name: "test", Reason: "a test account"}))
		_, err = l.SetPolicy(ctx, id, ledger.PolicyEdit{Set: rate}, ledger.Actor{Name: "bench", Reason: "the benchmark's rate limit (-rate)"})
		require.NoError(b, err)
	}
	if b.N >= 100 { // the testing package's first, one-intent run only finds the code path
		require.NoError(b, benchtest.Preload(ctx, db.Pool, "acct-1", *benchPreload))
	}
	srv := natstest.New(b)
	js := srv.Streams(b)
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
			if _, keys, err := in.BatchWritten(ctx); err == nil && !keys.Empty() {
				_ = irel.PublishWritten(ctx, keys)
			}
		}
	}()
	var children []*dispatcherProcess
	var inProcess []*ledger.Ledger
	for n := range dispatchers {
		if *benchProcess && b.N >= 100 {
			children = append(children, startDispatcher(b, db.AppURL(), srv.URL))
			continue
		}
		dl := newLedger(fmt.Sprintf("dispatcher-%d", n))
		inProcess = append(inProcess, dl)
		d, err := dispatch.New(ctx, js, dl, relay.New(dl, js, relay.Config{RemoveLater: true}), dispatch.Config{Platforms: platform.Registry{sim.Name: sim.Open}, Pipelines: *benchPipelines, Batch: *benchBatch, Concurrency: *benchConc})
		require.NoError(b, err)
		go func() { _ = d.Run(ctx) }()
	}
	alive := func() {
		for _, c := range children {
			c.alive(b)
		}
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
	backendsBefore, err := benchtest.BackendsCPU(ctx, db.Pool, db.Name)
	require.NoError(b, err)
	var before int64
	require.NoError(b, db.Pool.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&before))
	walBefore := walPosition(b, ctx, db.Pool)
	waits := sampleWaits(b, ctx, db.Name)

	if *benchProfile != "" {
		f, err := os.Create(*benchProfile)
		require.NoError(b, err)
		defer f.Close()
		require.NoError(b, pprof.StartCPUProfile(f))
	}
	selfBefore, _ := benchtest.CPUTimes()
	pgBefore := benchtest.ServerCPU(ctx, db.Pool)
	machineBusyBefore, machineBefore := benchtest.MachineCPU()
	childrenBefore := childrenCPU(children)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body := fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":"end to end %d"}}`, account(i), i)
		msg := &nats.Msg{Subject: events.IntentSubject(account(i)), Data: []byte(body)}
		if *benchTraced {
			msg.Header = nats.Header{tracecontext.Header: []string{fmt.Sprintf("00-%032x-%016x-01", i+1, i+1)}}
		}
		// Waiting for room among the 4,096 unacknowledged, as long as it takes: on a loaded
		// machine the default of 200 ms failed the run with 4 dispatchers.
		_, err := producer.PublishMsgAsync(msg, jetstream.WithStallWait(time.Minute))
		require.NoError(b, err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	// The platform's count is read in this process for free; the ledger is asked only once
	// every object exists, so the benchmark's own polling does not scan intents under load.
	for s.ObjectCount() < b.N && time.Now().Before(deadline) {
		alive()
		time.Sleep(10 * time.Millisecond)
	}
	for {
		var published int
		// The pool is SERIALIZABLE: a read may be chosen as a serialization victim; it is
		// simply asked again.
		if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM intents WHERE state = 'published' AND created_at >= $1`, since).Scan(&published); err == nil && published == b.N {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d published after 10 minutes", published, b.N)
		}
		alive()
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	selfAfter, _ := benchtest.CPUTimes()
	pgAfter := benchtest.ServerCPU(ctx, db.Pool)
	machineBusyAfter, machineAfter := benchtest.MachineCPU()
	dispatcherCPU := childrenCPU(children) - childrenBefore
	selfAfter += dispatcherCPU
	backendsAfter, err := benchtest.BackendsCPU(ctx, db.Pool, db.Name)
	require.NoError(b, err)
	waited := waits()
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
	restarts := il.Retries()
	for _, dl := range inProcess {
		restarts += dl.Retries()
	}
	var peakChild uint64
	works := map[string]float64{}
	for _, c := range children {
		peakChild = max(peakChild, benchtest.PeakResident(c.pid()))
		m := c.metrics(b)
		restarts += uint64(m["atmost_ledger_transaction_restarts_total"])
		for k, v := range m {
			if result, ok := strings.CutPrefix(k, `atmost_dispatch_work_total{result="`); ok {
				works[strings.TrimSuffix(result, `"}`)] += v
			}
		}
	}
	perIntent := func(v float64) float64 { return v / float64(b.N) }
	cpuPerIntent := func(d time.Duration) float64 { return perIntent(float64(d) / float64(time.Millisecond)) }
	b.ReportMetric(perIntent(float64(restarts)), "restarts/intent")
	if len(children) > 0 {
		b.ReportMetric(float64(peakChild)/(1<<20), "dispatcher-peak-MB")
		// The conflicts the dispatchers met beyond restarts: a claim that expired before its
		// Authorize, an intent fenced or whose completion was fenced out (the one that holds it
		// decides), and every work item handled again (redelivered, or found worked by
		// another). Every result is logged, with the messages of the dispatchers' logs.
		b.ReportMetric(perIntent(works["lease_lost"]+works["fenced"]+works["completion_fenced"]), "lease-lost/intent")
		var all float64
		for _, v := range works {
			all += v
		}
		b.ReportMetric(perIntent(all-works["completed"]), "redone/intent")
		b.Logf("work results of %d dispatchers: %v; their log: %v", len(children), works, logged(children))
		b.ReportMetric(cpuPerIntent(dispatcherCPU), "dispatcher-cpu-ms/intent")
	}
	b.ReportMetric(cpuPerIntent(selfAfter-selfBefore), "go-cpu-ms/intent")
	if pgAfter > pgBefore {
		b.ReportMetric(cpuPerIntent(pgAfter-pgBefore), "pg-cpu-ms/intent")
	}
	// Only this database's backends: on a server other work shares, pg-cpu-ms/intent counts
	// that work too (and the server's background processes, which this leaves out).
	b.ReportMetric(cpuPerIntent(benchtest.BackendsSpent(backendsBefore, backendsAfter)), "pg-db-cpu-ms/intent")
	// How busy the machine's cores were during the window, whoever kept them busy: near 1,
	// the rate is the machine's, and more dispatchers cannot raise it.
	if machineAfter > machineBefore {
		b.ReportMetric(float64(machineBusyAfter-machineBusyBefore)/float64(machineAfter-machineBefore), "machine-busy")
	}
	// Backends of this database running a statement, and of those waiting for a lock, on
	// average over the window; what they waited for is logged.
	b.ReportMetric(waited.mean(waited.active), "active-backends")
	b.ReportMetric(waited.lockWaiting(), "lock-waiting")
	if b.N >= 100 {
		b.Logf("backends running a statement, on average, by what they waited for: %s; and in which statement: %s",
			waited.top(waited.waits, 8), waited.top(waited.statements, 12))
	}
	// The write-ahead log of the window, from the log's insert position (exact, unlike
	// pg_stat_wal, which backends update at most once a second). The preload ends with a
	// CHECKPOINT, so the window is the start of a checkpoint cycle, where the first change to
	// each page logs the whole page (8 kB): pg_stat_wal showed about 1.7 full pages per intent
	// on a 100,000-intent ledger, most of the bytes. Measured once without that CHECKPOINT (no
	// full pages, a third of the bytes), throughput and CPU per intent did not improve: the full
	// pages cost write bandwidth here, not the CPU the two cores lack.
	b.ReportMetric(perIntent(float64(walAfter-walBefore)/1024), "wal-kB/intent")
	c := s.Counts()
	if c.GroupedReads > 0 {
		b.ReportMetric(float64(b.N)/float64(c.GroupedReads), "intents/grouped-read")
	}
	require.LessOrEqual(b, c.MaxCreatedPerKey, 1, "never two objects for one key")
	require.Equal(b, b.N, c.Objects)

	// PostgreSQL's own ceiling on this machine, measured in the same run: single-row insert
	// commits from 4 connections (the pool of one role), so the ratio of atmost's commit rate
	// to the database's is visible.
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

// alive fails the benchmark when the process has ended.
func (p *dispatcherProcess) alive(b *testing.B) {
	b.Helper()
	select {
	case err := <-p.done:
		p.over = true
		b.Fatalf("the dispatcher process ended during the run (%v):\n%s", err, p.out)
	default:
	}
}

var metricsClient = &http.Client{Timeout: 5 * time.Second}

// metrics reads the process's /metrics: each sample's value by its name and labels as the text
// format writes them (`atmost_dispatch_work_total{result="completed"}`). It fails the benchmark
// without atmost_ledger_transaction_restarts_total, which every role exports.
func (p *dispatcherProcess) metrics(b *testing.B) map[string]float64 {
	b.Helper()
	resp, err := metricsClient.Get("http://" + p.addr + "/metrics")
	require.NoError(b, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(b, err)
	samples := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(b, err, line)
		samples[line[:max(i, 0)]] = v
	}
	_, ok := samples["atmost_ledger_transaction_restarts_total"]
	require.True(b, ok, "the dispatcher process's /metrics has no atmost_ledger_transaction_restarts_total")
	return samples
}

// logged counts the dispatcher processes' log lines by message: why work was handled again (a
// batch whose Authorize restarted too often, a failed Begin) names itself there, beside the
// few lines of a start.
func logged(children []*dispatcherProcess) map[string]int {
	n := map[string]int{}
	for _, c := range children {
		for _, line := range strings.Split(c.out.String(), "\n") {
			var entry struct{ Msg string }
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg != "" {
				n[entry.Msg]++
			}
		}
	}
	return n
}

// childrenCPU is the CPU time the dispatcher processes have used so far.
func childrenCPU(children []*dispatcherProcess) time.Duration {
	var t time.Duration
	for _, c := range children {
		t += benchtest.ProcessCPU(c.pid())
	}
	return t
}

// waitSamples is what sampleWaits saw of a database's backends running a statement.
type waitSamples struct {
	samples int
	active  int            // backends running a statement, summed over the samples
	waits   map[string]int // of those, by what they waited for ("Lock:transactionid"; "CPU" for none)
	// by what they waited for and in which statement: the ledger's are named by sqlc's
	// "-- name:" line (IntentsAuthorize), any other by its first word (commit)
	statements map[string]int
}

// lockWaiting is how many backends waited for a heavyweight lock (a row another transaction
// holds, such as an account's rate bucket, or the transaction that holds it), on average.
func (w waitSamples) lockWaiting() float64 {
	var n int
	for k, v := range w.waits {
		if strings.HasPrefix(k, "Lock:") {
			n += v
		}
	}
	return w.mean(n)
}

func (w waitSamples) mean(n int) float64 {
	if w.samples == 0 {
		return 0
	}
	return float64(n) / float64(w.samples)
}

// top is the first n of counts by their average, largest first.
func (w waitSamples) top(counts map[string]int, n int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return counts[keys[i]] > counts[keys[j]] })
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, w.mean(counts[k])))
	}
	return strings.Join(parts, ", ")
}

// sampleWaits samples, every 20 ms until the returned function is called, the backends of
// database dbName running a statement and what each waits for, and that function returns what
// it saw. It asks from the server's maintenance database, so that its queries are not among the
// commits the benchmark counts in dbName.
func sampleWaits(b *testing.B, ctx context.Context, dbName string) func() waitSamples {
	b.Helper()
	conn, err := pgx.Connect(ctx, dbtest.AdminURL())
	require.NoError(b, err)
	stop := make(chan struct{})
	done := make(chan struct{})
	seen := waitSamples{waits: map[string]int{}, statements: map[string]int{}}
	go func() {
		defer close(done)
		defer conn.Close(context.WithoutCancel(ctx))
		for {
			rows, err := conn.Query(ctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'),
				       coalesce(substring(query FROM '^-- name: (\w+)'), lower(split_part(ltrim(query), ' ', 1))), count(*)::INT
				FROM pg_stat_activity WHERE datname = $1 AND state = 'active' GROUP BY 1, 2`, dbName)
			if err == nil {
				var wait, statement string
				var n int
				_, err = pgx.ForEachRow(rows, []any{&wait, &statement, &n}, func() error {
					seen.waits[wait] += n
					seen.statements[wait+" in "+statement] += n
					seen.active += n
					return nil
				})
			}
			if err == nil { // an error (a cancelled context) is simply not a sample
				seen.samples++
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() waitSamples {
		close(stop)
		<-done
		return seen
	}
}

// startDispatcher runs this test binary again as the dispatcher role (TestBenchDispatcher), on
// the given ledger and broker, with the benchmark's isolation, pipelines, batch and concurrency, and waits
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
	if *benchConc > 0 {
		args = append(args, "--concurrency", fmt.Sprint(*benchConc))
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
