// Package benchtest is what atmost's benchmarks measure of the machine besides the work: the
// CPU time of this process, of another, of the local PostgreSQL server, of one database's
// backends and of the whole machine, a process's peak memory, and PostgreSQL's ceiling of
// single-row commits per second that day.
package benchtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// CPUTimes is the CPU time this process and the local PostgreSQL server have used so far.
// The server's figure sums every process named postgres, including the exited backends its
// postmaster has waited for; it is zero where /proc does not show the server (another
// machine, another OS), and the benchmark then leaves it out.
func CPUTimes() (self, postgres time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, path := range stats {
		if comm, n, ok := procTicks(path); ok && comm == "postgres" {
			ticks += n
		}
	}
	return self, ticksToDuration(ticks)
}

// ServerCPU is the CPU time the PostgreSQL server behind pool has used so far: its postmaster
// (whose figure includes the backends that exited) and every process it started that still
// runs (backends, the WAL writer, the checkpointer, ...). Unlike CPUTimes it leaves out any
// other server on the machine, such as a cluster that other work shares it with; work of
// others on the same server still counts. Zero where /proc does not show the server.
func ServerCPU(ctx context.Context, pool *pgxpool.Pool) time.Duration {
	var backend int
	if pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend) != nil {
		return 0
	}
	postmaster := parentOf(backend)
	if postmaster <= 1 {
		return 0
	}
	_, ticks, _ := procTicks(filepath.Join("/proc", strconv.Itoa(postmaster), "stat"))
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if pid != postmaster && parentOf(pid) == postmaster {
			_, n, _ := procTicks(path)
			ticks += n
		}
	}
	return ticksToDuration(ticks)
}

// parentOf is the parent of process pid (0 where /proc does not show it).
func parentOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0
	}
	// After the command: state, then the parent's pid.
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// BackendsCPU is the CPU time each PostgreSQL backend connected to dbName has used so far, by
// pid: the part of the server's work that is one database's where other work shares the
// server. The server's background processes (WAL writer, checkpointer, autovacuum) are not
// among them; the local server only (/proc).
func BackendsCPU(ctx context.Context, pool *pgxpool.Pool, dbName string) (map[int]time.Duration, error) {
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1`, dbName)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	backends := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		backends[int(pid)] = ProcessCPU(int(pid))
	}
	return backends, nil
}

// BackendsSpent is the CPU time the backends spent between two BackendsCPU readings: a
// backend that started in between counts whole, one that ended in between not at all (pools
// keep theirs).
func BackendsSpent(before, after map[int]time.Duration) time.Duration {
	var spent time.Duration
	for pid, t := range after {
		spent += t - before[pid]
	}
	return spent
}

// MachineCPU is the CPU time all the machine's cores have been busy and have existed so far
// (/proc/stat, every process and the kernel; zero where it cannot be read): the busy share of
// a window is the difference of busy over the difference of total. Waiting for I/O counts as
// idle.
func MachineCPU() (busy, total time.Duration) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0
	}
	var all int64
	for i, f := range fields[1:9] {
		n, _ := strconv.ParseInt(f, 10, 64)
		all += n
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		busy += ticksToDuration(n)
	}
	return busy, ticksToDuration(all)
}

// ProcessCPU is the CPU time process pid has used so far (zero where /proc does not show it).
func ProcessCPU(pid int) time.Duration {
	_, n, _ := procTicks(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	return ticksToDuration(n)
}

// PeakResident is the most memory process pid has held resident (VmHWM), in bytes; zero where
// /proc does not show it.
func PeakResident(pid int) uint64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// procTicks reads a /proc/PID/stat file: the command name and the clock ticks the process and
// its waited-for children spent.
func procTicks(path string) (comm string, ticks int64, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, false
	}
	// After the command: state is field 3; utime, stime, cutime, cstime are 14-17.
	fields := strings.Fields(s[end+1:])
	if len(fields) < 15 {
		return "", 0, false
	}
	for _, f := range fields[11:15] {
		n, _ := strconv.ParseInt(f, 10, 64)
		ticks += n
	}
	return s[open+1 : end], ticks, true
}

// ticksToDuration converts clock ticks: Linux reports them in 1/100 s (USER_HZ) on every
// architecture Go runs on.
func ticksToDuration(ticks int64) time.Duration { return time.Duration(ticks) * 10 * time.Millisecond }

// CommitCeiling measures how many single-row INSERT commits per second PostgreSQL takes
// from workers connections at once, for d: the day's ceiling that the figures of a benchmark
// are read against (this machine's PostgreSQL varies from day to day more than from run to
// run). It creates the table commit_probe in the pool's database.
func CommitCeiling(b testing.TB, ctx context.Context, pool *pgxpool.Pool, workers int, d time.Duration) float64 {
	ceiling, err := MeasureCommitCeiling(ctx, pool, workers, d)
	require.NoError(b, err)
	return ceiling
}

// MeasureCommitCeiling is CommitCeiling for a program that is not a test (bench/peer): it
// fails only when the table commit_probe cannot be created, for instance because it exists.
func MeasureCommitCeiling(ctx context.Context, pool *pgxpool.Pool, workers int, d time.Duration) (float64, error) {
	if _, err := pool.Exec(ctx, `CREATE TABLE commit_probe (worker INT NOT NULL, n BIGINT NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT now(), PRIMARY KEY (worker, n))`); err != nil {
		return 0, err
	}
	var total atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for w := range workers {
		wg.Go(func() {
			for n := 0; time.Now().Before(stop); n++ {
				if _, err := pool.Exec(ctx, `INSERT INTO commit_probe (worker, n) VALUES ($1, $2)`, w, n); err == nil {
					total.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(total.Load()) / d.Seconds(), nil
}

// Preload writes n published intents of account straight into the ledger's tables, with the
// rows their way there left (four history rows, an attempt, its evidence, a text claim), then
// vacuums and analyzes every table and checkpoints: the ledger of a deployment that has been
// running, whose planner statistics describe tables of this size and whose autovacuum has
// caught up. A brand-new ledger's tables grow from nothing during the run, faster than
// autovacuum analyzes them, which measures a moment no deployment stays in for long.
func Preload(ctx context.Context, pool *pgxpool.Pool, account string, n int) error {
	if n == 0 {
		return nil
	}
	// One connection throughout: the preload table is temporary, seen only by the session
	// that made it.
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
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
		 SELECT k, {account}, 'post', '{"text":"preload ' || g || '"}', th, 'published', 'published', 4,
		        1, tok, 1, gen, 'obj-preload-' || g, at, at FROM preload`,
		`INSERT INTO history (delivery_key, seq, from_state, to_state, reason, attempt_token, epoch, generation, actor, at)
		 SELECT k, s.seq, s.f, s.t, s.r, CASE WHEN s.seq > 1 THEN tok END, CASE WHEN s.seq > 1 THEN 1 END,
		        CASE WHEN s.seq > 1 THEN gen END, 'preload', at
		 FROM preload CROSS JOIN (VALUES (1, NULL, 'pending', 'submitted'), (2, 'pending', 'pending', 'claimed'),
		      (3, 'pending', 'authorized', 'authorized'), (4, 'authorized', 'published', 'published')) AS s(seq, f, t, r)`,
		`INSERT INTO attempts (attempt_token, delivery_key, account_id, action, request_hash, credential_version, epoch, generation, created_at)
		 SELECT tok, k, {account}, 'post', th, 1, 1, gen, at FROM preload`,
		`INSERT INTO attempt_evidence (attempt_token, delivery_key, epoch, generation, outcome, reason, object_id, fenced, recorded_at)
		 SELECT tok, k, 1, gen, 'success', 'published', 'obj-preload-' || g, false, at FROM preload`,
		`INSERT INTO text_claims (account_id, text_hash, delivery_key, last_at) SELECT {account}, th, k, at FROM preload`,
		`DROP TABLE preload`,
		`VACUUM (ANALYZE)`,
		`CHECKPOINT`,
	} {
		q = strings.ReplaceAll(q, "{account}", "'"+strings.ReplaceAll(account, "'", "''")+"'")
		var args []any
		if strings.Contains(q, "$1") {
			args = append(args, n)
		}
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	return nil
}
