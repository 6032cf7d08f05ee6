package reconcile_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/testkit/benchtest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// benchDelay is the account's reconcile delay in the benchmarks: the wait before a lookup is
// meaningful, which every resolution below includes.
const benchDelay = time.Second

var benchConcurrency = flag.Int("concurrency", 0, "the reconciler's concurrency in the benchmarks (0: its default)")

// BenchmarkReconcile measures how reconciliation keeps pace with unknown outcomes, on the real
// ledger and JetStream, with the reconciler's default configuration (its scan interval too):
//
//   - unknowns=5% and unknowns=20%: b.N intents dispatched to the platform simulator while a
//     reconciler runs, that share of sends ending with an unknown outcome (half of them created
//     on the platform, half not). Reported: the time from indeterminate to resolved (p50, p99,
//     max; it includes the 1 s reconcile delay), and lookups per second over the reconciler's
//     busy span.
//   - backlog: b.N intents already indeterminate and past their delay (the backlog after an
//     outage of the platform's lookup) when the reconciler starts. Reported: lookups per
//     second until the last is resolved, and the time from the start to each resolution.
//
// The resolution times are read from the ledger's history (the database's clock). The backlog
// also reports the CPU per lookup of this process (reconciler, simulator, NATS) and of the
// local PostgreSQL server (every process of it: run alone), and the day's PostgreSQL ceiling of
// single-row commits a second, which every figure is read against.
func BenchmarkReconcile(b *testing.B) {
	for _, share := range []float64{0.05, 0.20} {
		b.Run(fmt.Sprintf("unknowns=%d%%", int(share*100)), func(b *testing.B) { benchUnknowns(b, share) })
	}
	b.Run("backlog", benchBacklog)
}

type benchWorld struct {
	*worldtest.World
	sim *platformsim.Server
}

func newBenchWorld(b *testing.B, share float64) *benchWorld {
	w := &benchWorld{World: worldtest.New(b)}
	var url string
	w.sim, url = w.Simulator(platformsim.Config{Plan: platformsim.Plan{Seed: 11, Rates: map[platformsim.Fault]float64{
		platformsim.FaultDropAfterCommit: share / 2, platformsim.FaultDropBeforeRead: share / 2}}})
	settings, err := json.Marshal(map[string]any{"url": url, "reconcile_delay": benchDelay.String()})
	require.NoError(b, err)
	require.NoError(b, w.Ledger.AddAccount(w.Ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: settings}, ledger.Actor{Name: "test", Reason: "a test account"}))
	w.Exec(`UPDATE policies SET rate_per_minute = 0 WHERE scope = ''`)
	return w
}

func (w *benchWorld) submit(n int) []identity.DeliveryKey {
	keys := make([]identity.DeliveryKey, 0, n)
	for i := 0; i < n; i += 500 {
		keys = append(keys, w.Submit("acct-1", worldtest.Texts(fmt.Sprintf("bench %d", i), min(500, n-i))...)...)
	}
	return keys
}

func (w *benchWorld) dispatcher() (stop func()) {
	d, err := dispatch.New(w.Ctx, w.JS, w.Ledger, w.Relay, dispatch.Config{Platforms: platform.Registry{sim.Name: sim.Open}})
	require.NoError(w.T, err)
	return w.Run(d.Run)
}

func (w *benchWorld) reconciler() (stop func()) {
	l, err := ledger.New(w.DB.AppPool(w.T), ledger.Config{Actor: "reconciler"})
	require.NoError(w.T, err)
	r, err := reconcile.New(w.Ctx, w.JS, l, relay.New(l, w.JS, relay.Config{}), reconcile.Config{Platforms: platform.Registry{sim.Name: sim.Open},
		Concurrency: *benchConcurrency})
	require.NoError(w.T, err)
	return w.Run(r.Run)
}

// settle waits until no intent is in one of states, reading the counts the sweeper's gauge
// reads (through the indexes of the intents not published), so the waiting costs the ledger
// little next to what is measured.
func (w *benchWorld) settle(states ...ledger.State) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		counts, err := w.Ledger.Outstanding(w.Ctx)
		require.NoError(w.T, err)
		moving := int64(0)
		for _, st := range states {
			moving += counts[st]
		}
		if moving == 0 {
			return
		}
		if time.Now().After(deadline) {
			w.T.Fatalf("%d intents still %v after 10 minutes", moving, states)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var notDone = []ledger.State{ledger.Pending, ledger.Authorized, ledger.Indeterminate}

func benchUnknowns(b *testing.B, share float64) {
	w := newBenchWorld(b, share)
	defer w.reconciler()()
	defer w.dispatcher()()
	b.ResetTimer()
	w.submit(b.N)
	w.settle(notDone...)
	b.StopTimer()
	// From each intent's indeterminate transition to the next one, its resolution.
	var unknowns int
	var p50, p99, worst float64
	require.NoError(b, w.DB.AppPool(b).QueryRow(w.Ctx, `
		SELECT count(*),
		       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY s), 0),
		       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY s), 0),
		       coalesce(max(s), 0)
		FROM (SELECT extract(epoch FROM r.at - i.at)::FLOAT8 AS s
		      FROM history i JOIN history r ON r.delivery_key = i.delivery_key AND r.seq = i.seq + 1
		      WHERE i.to_state = 'indeterminate') x`).Scan(&unknowns, &p50, &p99, &worst))
	b.ReportMetric(float64(unknowns), "unknowns")
	b.ReportMetric(p50, "resolve-p50-s")
	b.ReportMetric(p99, "resolve-p99-s")
	b.ReportMetric(worst, "resolve-max-s")
	b.ReportMetric(lookupsPerSecond(w), "lookups/s")
	b.ReportMetric(0, "ns/op")
}

func benchBacklog(b *testing.B) {
	w := newBenchWorld(b, 1)
	stop := w.dispatcher()
	w.submit(b.N)
	w.settle(ledger.Pending, ledger.Authorized)
	stop()
	time.Sleep(benchDelay) // every lookup is due
	var start time.Time
	require.NoError(b, w.DB.AppPool(b).QueryRow(w.Ctx, `SELECT clock_timestamp()`).Scan(&start))
	selfBefore, pgBefore := benchtest.CPUTimes()
	b.ResetTimer()
	stop = w.reconciler()
	w.settle(notDone...)
	b.StopTimer()
	selfAfter, pgAfter := benchtest.CPUTimes()
	stop()
	var p50, p99, worst float64
	require.NoError(b, w.DB.AppPool(b).QueryRow(w.Ctx, `
		SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY s), percentile_cont(0.99) WITHIN GROUP (ORDER BY s), max(s)
		FROM (SELECT extract(epoch FROM h.at - $1)::FLOAT8 AS s FROM history h WHERE h.from_state = 'indeterminate') x`, start).Scan(&p50, &p99, &worst))
	b.ReportMetric(float64(w.Count(`SELECT count(*) FROM intents WHERE state <> 'published' AND state <> 'parked'`)), "unresolved")
	b.ReportMetric(p50, "resolve-p50-s")
	b.ReportMetric(p99, "resolve-p99-s")
	b.ReportMetric(worst, "resolve-max-s")
	b.ReportMetric(float64(b.N)/worst, "lookups/s")
	b.ReportMetric(float64((selfAfter-selfBefore).Microseconds())/float64(b.N)/1000, "go-cpu-ms/lookup")
	if pgAfter > 0 {
		b.ReportMetric(float64((pgAfter-pgBefore).Microseconds())/float64(b.N)/1000, "pg-cpu-ms/lookup")
	}
	b.ReportMetric(benchtest.CommitCeiling(b, w.Ctx, w.DB.Pool, 4, 3*time.Second), "pg-ceiling-commits/s")
	b.ReportMetric(0, "ns/op")
}

// lookupsPerSecond is the lookups made over the span from the first claim to the last
// resolution, by the database's clock.
func lookupsPerSecond(w *benchWorld) float64 {
	var n int
	var span float64
	require.NoError(w.T, w.DB.AppPool(w.T).QueryRow(w.Ctx, `
		SELECT count(*) FILTER (WHERE step = 'claimed'),
		       coalesce(extract(epoch FROM max(at) - min(at)), 0)::FLOAT8
		FROM reconciliations`).Scan(&n, &span))
	if span == 0 {
		return 0
	}
	return float64(n) / span
}
