package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/atmost/atmost/internal/testkit/benchtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
)

// database is a fresh database of the run on the server of the admin URL.
type database struct {
	name, url string
	admin     string
}

// databasePrefix starts the name of every database the run makes: make clean-test-databases
// drops what an interrupted run left.
const databasePrefix = "atmost_test_peer_"

// createDatabase makes an empty database named after side.
func createDatabase(ctx context.Context, admin, side string) (*database, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := databasePrefix + side + "_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL at -database-url: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + name
	return &database{name: name, url: u.String(), admin: admin}, nil
}

// drop removes the database, whatever still holds a connection to it. It runs after ctx may
// have ended (an interrupted run still cleans up).
func (d *database) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, d.admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", pgx.Identifier{d.name}.Sanitize()))
	return err
}

// ceilingWorkers and ceilingWindow are those of the end-to-end benchmark's probe, so the
// figures read against the same ceiling (docs/performance.md).
const (
	ceilingWorkers = 4
	ceilingWindow  = 3 * time.Second
)

// commitCeiling measures PostgreSQL's single-row commit ceiling of the moment in a database of
// its own.
func commitCeiling(ctx context.Context, admin string) (float64, error) {
	db, err := createDatabase(ctx, admin, "probe")
	if err != nil {
		return 0, err
	}
	defer func() { _ = db.drop() }()
	cfg, err := pgxpool.ParseConfig(db.url)
	if err != nil {
		return 0, err
	}
	cfg.MaxConns = ceilingWorkers
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	return benchtest.MeasureCommitCeiling(ctx, pool, ceilingWorkers, ceilingWindow)
}

// cpuMark is the CPU time spent so far by this process and by the PostgreSQL backends
// connected to one database, by pid.
type cpuMark struct {
	self     time.Duration
	backends map[int]time.Duration
}

// markCPU reads the CPU times of this process and of dbName's backends. Only the backends
// serving the side's database count, not the server as a whole, because other work shares
// the server (benchtest.BackendsCPU).
func markCPU(ctx context.Context, pool *pgxpool.Pool, dbName string) (cpuMark, error) {
	self, _ := benchtest.CPUTimes()
	backends, err := benchtest.BackendsCPU(ctx, pool, dbName)
	return cpuMark{self: self, backends: backends}, err
}

// cpuSpent is what was spent between two marks: this process, and the database's backends.
func cpuSpent(before, after cpuMark) (self, postgres time.Duration) {
	return after.self - before.self, benchtest.BackendsSpent(before.backends, after.backends)
}

// cpuWindow is the span of one run that its CPU per intent is measured over, and with -parts
// the span its profile covers: one window, so that the parts always share out the figure the
// report gives.
type cpuWindow struct {
	pool   *pgxpool.Pool
	dbName string
	before cpuMark
	prof   *partsProfile
}

// openWindow starts a run's window on dbName's backends; parts profiles it too. A run that
// fails must abandon it (a deferred abandon after close does nothing).
func openWindow(ctx context.Context, pool *pgxpool.Pool, dbName string, parts bool) (*cpuWindow, error) {
	prof, err := startParts(parts)
	if err != nil {
		return nil, err
	}
	w := &cpuWindow{pool: pool, dbName: dbName, prof: prof}
	if w.before, err = markCPU(ctx, pool, dbName); err != nil {
		prof.abandon()
		return nil, err
	}
	return w, nil
}

// close ends the window: the CPU this process and the database's backends spent in it, and
// with -parts each part's share of the process's (nil without).
func (w *cpuWindow) close(ctx context.Context) (self, postgres time.Duration, parts map[string]float64, err error) {
	after, err := markCPU(ctx, w.pool, w.dbName)
	if err != nil {
		return 0, 0, nil, err
	}
	self, postgres = cpuSpent(w.before, after)
	if parts, err = w.prof.stop(); err != nil {
		return 0, 0, nil, err
	}
	return self, postgres, parts, nil
}

// abandon ends the window's profile, if it has one and close did not end it.
func (w *cpuWindow) abandon() { w.prof.abandon() }

// perIntent is d per intent, in milliseconds.
func perIntent(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Millisecond) / float64(n)
}

// duplicates reads the platform's own count: how many keys have more than one object, and
// how many objects there are beyond the first of each key.
func duplicates(c platformsim.Counts) (keys, extra int) {
	for _, n := range c.Created {
		if n > 1 {
			keys++
			extra += n - 1
		}
	}
	return keys, extra
}

// quantile is the nearest-rank q-quantile of sorted (0 when it is empty).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// summary is the quantiles the steady mode prints, of a set of latencies.
type summary struct {
	n                      int
	p50, p99, p999, maxLat time.Duration
}

func summarize(ds []time.Duration) summary {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return summary{}
	}
	return summary{n: len(s), p50: quantile(s, 0.5), p99: quantile(s, 0.99), p999: quantile(s, 0.999), maxLat: s[len(s)-1]}
}

// freeAddr is a loopback address with a port free a moment ago: the roles' HTTP endpoints are
// given one each, so the run can ask their /readyz and never collides with another stack.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond))
}

// thousands formats n with a comma every three digits, as the docs write figures.
func thousands(n float64) string {
	s := fmt.Sprintf("%.0f", n)
	neg := len(s) > 0 && s[0] == '-'
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		return "-" + s
	}
	return s
}
