package dbtest

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/atmost/atmost/internal/migrate"
	"github.com/atmost/atmost/internal/redact"
	"github.com/atmost/atmost/migrations"
)

// cockroach is the CockroachDB cluster New uses instead of PostgreSQL while UseCockroachDB is in
// force, nil otherwise.
var cockroach atomic.Pointer[cockroachServer]

type cockroachServer struct {
	url  string
	pool *pgxpool.Pool
}

// UseCockroachDB makes New create its databases on the CockroachDB cluster at url until t ends,
// so that tests written for PostgreSQL run unchanged on CockroachDB (the optional CockroachDB
// lane). The user in url must be allowed to create databases and roles, and the cluster must be
// insecure: AppURL logs in as the application role without a password.
//
// CockroachDB has no CREATE DATABASE ... TEMPLATE, so every database is migrated from
// migration 1 (seconds, not milliseconds) and dropped with CASCADE.
//
// t must be a top-level test that does not call t.Parallel: Go starts no other top-level test
// while it runs, so every New meanwhile comes from one of its subtests.
func UseCockroachDB(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		t.Fatalf("dbtest: CockroachDB is not reachable at %s: %v", redact.URL(url), err)
	}
	var version string
	if err := pool.QueryRow(ctx, `SELECT version()`).Scan(&version); err != nil {
		pool.Close()
		t.Fatalf("dbtest: read the server version at %s: %v", redact.URL(url), err)
	}
	if !strings.Contains(version, "CockroachDB") {
		pool.Close()
		t.Fatalf("dbtest: %s is not CockroachDB: %s", redact.URL(url), version)
	}
	// migrate.Up creates the application role when it is missing, tolerating a concurrent
	// creator's "already exists"; on CockroachDB parallel creators can meet a serialization
	// failure instead, so the role is made once here, before any test migrates.
	if _, err := pool.Exec(ctx, "CREATE ROLE IF NOT EXISTS "+pgx.Identifier{migrations.AppRole}.Sanitize()+" LOGIN"); err != nil {
		pool.Close()
		t.Fatalf("dbtest: create role %s: %v", migrations.AppRole, err)
	}
	if !cockroach.CompareAndSwap(nil, &cockroachServer{url: url, pool: pool}) {
		pool.Close()
		t.Fatal("dbtest: UseCockroachDB is already in force")
	}
	t.Cleanup(func() {
		cockroach.Store(nil)
		pool.Close()
	})
	t.Logf("dbtest: test databases on CockroachDB at %s (%s)", redact.URL(url), version)
}

// newDB creates and migrates one test's database on the cluster.
func (s *cockroachServer) newDB(t testing.TB, o options) *DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	name := "atmost_test_" + randomHex(8)
	if _, err := s.pool.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("dbtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if os.Getenv("ATMOST_TEST_KEEP_DB") == "1" {
			t.Logf("dbtest: kept database %s", name)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := s.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	if !o.empty {
		if _, err := migrate.Up(ctx, withDatabase(s.url, name, Serializable), migrate.Options{}); err != nil {
			t.Fatalf("dbtest: migrate %s on CockroachDB: %v", name, err)
		}
	}
	db := &DB{Name: name, URL: withDatabase(s.url, name, o.isolation), isolation: o.isolation}
	pool, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		t.Fatalf("dbtest: open pool on %s: %v", name, err)
	}
	db.Pool = pool
	t.Cleanup(pool.Close)
	return db
}
