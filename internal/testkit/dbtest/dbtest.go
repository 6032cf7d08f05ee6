// Package dbtest gives every test its own freshly migrated PostgreSQL database, so tests that
// run in parallel, in one package or in many, never share ledger state.
//
// The first call in a test binary builds a template database migrated from migration 1 and
// named after a hash of the migration files; every test then gets a clone of it
// (CREATE DATABASE ... TEMPLATE), dropped when the test ends. Test binaries that run at the same
// time build the template once between them: each builds under a private name and renames it
// into place, and the loser of that race drops its copy. Templates of earlier versions of the
// migrations are never dropped automatically (another checkout may be using one): make
// clean-test-databases removes every database the tests made.
//
// The server comes from ATMOST_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable), whose user must be allowed to
// create databases and roles. When the server cannot be reached, tests are skipped with a
// message naming the fix, except under CI=true, where they fail: CI must never pass by skipping
// the real-database lane.
//
// UseCockroachDB points New at a CockroachDB cluster instead, for the optional CockroachDB lane.
//
// Under go test -short (make test-short) without CI=true, New skips its test: see
// SkipInShortLane.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/atmost/atmost/internal/migrate"
	"github.com/atmost/atmost/internal/redact"
	"github.com/atmost/atmost/migrations"
)

// DefaultAdminURL is the server tests use when ATMOST_TEST_DATABASE_URL is unset.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Isolation levels a test database's connections can default to.
const (
	Serializable   = "serializable"
	ReadCommitted  = "read committed"
	RepeatableRead = "repeatable read"
)

// DB is one test's private database.
type DB struct {
	// Name is the database's name on the server.
	Name string
	// URL connects to it as the owner (the admin user), with the test's isolation level as the
	// default for every transaction.
	URL string
	// Pool is a connection pool on URL, closed when the test ends.
	Pool *pgxpool.Pool

	isolation string
}

type options struct {
	isolation string
	empty     bool
}

// Option changes what New prepares.
type Option func(*options)

// WithIsolation sets the default transaction isolation of the database's connections
// (Serializable when not given).
func WithIsolation(level string) Option {
	return func(o *options) { o.isolation = level }
}

// Empty gives the test a database with no schema at all, for tests of the migrations
// themselves.
func Empty() Option {
	return func(o *options) { o.empty = true }
}

// New creates a database for t, migrated to the latest version unless Empty is given, and drops
// it when t ends (set ATMOST_TEST_KEEP_DB=1 to keep it for a look after a failure).
func New(t testing.TB, opts ...Option) *DB {
	t.Helper()
	SkipInShortLane(t, "it clones a database of its own")
	o := options{isolation: Serializable}
	for _, opt := range opts {
		opt(&o)
	}
	if s := cockroach.Load(); s != nil {
		return s.newDB(t, o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	admin := adminPool(t)
	template := "template1"
	if !o.empty {
		name, err := migratedTemplate(ctx, admin)
		if err != nil {
			t.Fatalf("dbtest: build the migrated template database: %v", err)
		}
		template = name
	}
	name := "atmost_test_" + randomHex(8)
	err := retryBusy(ctx, func() error {
		_, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize())
		return err
	})
	if err != nil {
		t.Fatalf("dbtest: create database %s from %s: %v", name, template, err)
	}
	db := &DB{Name: name, URL: withDatabase(adminURL(), name, o.isolation), isolation: o.isolation}
	pool, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		t.Fatalf("dbtest: open pool on %s: %v", name, err)
	}
	db.Pool = pool
	t.Cleanup(func() {
		pool.Close()
		if os.Getenv("ATMOST_TEST_KEEP_DB") == "1" {
			t.Logf("dbtest: kept database %s", name)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	return db
}

// SkipInShortLane skips t in make test-short's lane (go test -short without CI=true), saying why
// the test is slow; make test, and anything under CI=true, runs it. The lane leaves out what
// takes seconds a test (a database of its own, a browser, a build of every binary) so that a
// contributor gets the rest in about a minute; it proves less than make test and never stands
// for it.
func SkipInShortLane(t testing.TB, why string) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skipf("not in the short lane (go test -short): %s; make test runs it", why)
	}
}

// AppURL connects to the test's database as the application role (migrations.AppRole), with
// the same default isolation. The server must let that role log in (trust or a password in
// ATMOST_TEST_DATABASE_URL's place is not inherited: the role has none).
func (db *DB) AppURL() string {
	u, _ := url.Parse(db.URL)
	u.User = url.User(migrations.AppRole)
	return u.String()
}

// AppPool opens a pool on AppURL, closed when t ends.
func (db *DB) AppPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), db.AppURL())
	if err != nil {
		t.Fatalf("dbtest: open pool as %s: %v", migrations.AppRole, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// AdminURL is the server's URL as the admin user, on its maintenance database (not a test's):
// ATMOST_TEST_DATABASE_URL, or DefaultAdminURL when that is unset.
func AdminURL() string { return adminURL() }

func adminURL() string {
	if u := os.Getenv("ATMOST_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultAdminURL
}

// withDatabase returns base pointing at database name, with isolation as the default for
// every transaction.
func withDatabase(base, name, isolation string) string {
	u, err := url.Parse(base)
	if err != nil {
		panic(fmt.Sprintf("dbtest: ATMOST_TEST_DATABASE_URL is not a URL: %v", err))
	}
	u.Path = "/" + name
	q := u.Query()
	q.Set("default_transaction_isolation", isolation)
	// pgx reads '+' literally, so spaces ("read committed") must travel as %20.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u.String()
}

var admin struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

// adminPool connects once per test binary to the admin URL. An unreachable server fails the
// test under CI=true and skips it elsewhere, naming the fix either way.
func adminPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	admin.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		pool, err := pgxpool.New(ctx, adminURL())
		if err == nil {
			err = pool.Ping(ctx)
		}
		if err != nil {
			admin.err = fmt.Errorf("PostgreSQL is not reachable at %s: %w; run make postgres (it starts a local cluster, or names the command that fixes it) or point ATMOST_TEST_DATABASE_URL at a server whose user may create databases and roles", redact.URL(adminURL()), err)
			return
		}
		admin.pool = pool
	})
	if admin.err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("dbtest: %v", admin.err)
		}
		skipped.Do(func() { announceSkip(os.Args[0], admin.err) })
		t.Skipf("dbtest: %v (under CI=true this is a failure)", admin.err)
	}
	return admin.pool
}

// skipped makes the skip announced once per test binary: one line per package.
var skipped sync.Once

// announceSkip says, on the go command's standard error, that a package's database tests were
// skipped. go test shows a passing package's own output only with -v, so a skip printed there
// alone leaves a plain `go test ./...` green while the database lane tested nothing. The test
// binary's parent is the go command; where its standard error cannot be opened (not Linux, a
// -exec wrapper that closed it), the binary's own is used.
func announceSkip(binary string, err error) {
	pkg := strings.TrimSuffix(filepath.Base(binary), ".test")
	line := fmt.Sprintf("dbtest: %s: its database tests were SKIPPED, not run: %v\n", pkg, err)
	if f, openErr := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", os.Getppid()), os.O_WRONLY|os.O_APPEND, 0); openErr == nil {
		_, _ = f.WriteString(line)
		_ = f.Close()
		return
	}
	_, _ = os.Stderr.WriteString(line)
}

var template struct {
	mu   sync.Mutex
	name string
}

// migratedTemplate returns the name of a database migrated to the latest version, building it
// if no test binary has yet. Its name carries a hash of the migration files, so a changed
// migration never reuses a stale template.
func migratedTemplate(ctx context.Context, admin *pgxpool.Pool) (string, error) {
	template.mu.Lock()
	defer template.mu.Unlock()
	if template.name != "" {
		return template.name, nil
	}
	digest, err := migrationsDigest()
	if err != nil {
		return "", err
	}
	name := "atmost_tmpl_" + digest
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return "", err
	}
	if !exists {
		if err := buildTemplate(ctx, admin, name); err != nil {
			return "", err
		}
	}
	template.name = name
	return name, nil
}

func buildTemplate(ctx context.Context, admin *pgxpool.Pool, name string) error {
	building := "atmost_build_" + randomHex(6)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{building}.Sanitize()); err != nil {
		return fmt.Errorf("create %s: %w", building, err)
	}
	drop := func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{building}.Sanitize()+" WITH (FORCE)")
	}
	if _, err := migrate.Up(ctx, withDatabase(adminURL(), building, Serializable), migrate.Options{}); err != nil {
		drop()
		return fmt.Errorf("migrate %s: %w", building, err)
	}
	err := retryBusy(ctx, func() error {
		_, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{building}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize())
		return err
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		// Another test binary finished first (42P04), or renamed at the same instant and
		// won on pg_database's unique index (23505): its template is identical.
		drop()
		return nil
	}
	if err != nil {
		drop()
		return fmt.Errorf("rename %s to %s: %w", building, name, err)
	}
	return nil
}

// retryBusy retries op while PostgreSQL reports that a database it needs is still being
// accessed (SQLSTATE 55006): a backend of a just-closed connection can linger for a moment.
func retryBusy(ctx context.Context, op func() error) error {
	delay := 20 * time.Millisecond
	for {
		err := op()
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up waiting: %v)", err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

func migrationsDigest() (string, error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	h := sha256.New()
	for _, name := range names {
		body, err := fs.ReadFile(migrations.FS, name)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(body))
		h.Write(body)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
