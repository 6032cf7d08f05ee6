package dev_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/dev"
	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// withDatabase is base naming the database name instead.
func withDatabase(t *testing.T, base, name string) string {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

// demoDatabase is a database name of the test's own on the test server, dropped when it ends.
func demoDatabase(t *testing.T) (admin *pgxpool.Pool, name string) {
	t.Helper()
	db := dbtest.New(t, dbtest.Empty())
	name = fmt.Sprintf("atmost_test_demo_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		_, _ = db.Pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return db.Pool, name
}

// The demo recreates only a database it created itself: one that somebody else created, a
// ledger say, is refused whatever its name, and keeps every row; a URL that names the server's
// maintenance database, or none, is refused too.
func TestTheDemoNeverDropsADatabaseItDidNotCreate(t *testing.T) {
	t.Parallel()
	admin, name := demoDatabase(t)
	ctx := context.Background()
	_, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	require.NoError(t, err)
	dbURL := withDatabase(t, dbtest.AdminURL(), name)
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (1)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	var out bytes.Buffer
	_, err = dev.Demo(ctx, dev.DemoOptions{DatabaseURL: dbURL, Intents: 10, Out: &out})
	require.ErrorContains(t, err, "database "+name+" exists and was not created by atmost demo")

	conn, err = pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n))
	require.Equal(t, 1, n, "the database and its rows are untouched")

	for _, path := range []string{"postgres", ""} {
		_, err = dev.Demo(ctx, dev.DemoOptions{DatabaseURL: withDatabase(t, dbtest.AdminURL(), path), Intents: 10, Out: &out})
		require.ErrorContains(t, err, "names no database of its own", path)
	}
}

// The database the URL names is the demo's: created, marked, and on the next run dropped and
// created again, empty; no other database of the server is touched.
func TestTheDemoRecreatesTheDatabaseItsURLNames(t *testing.T) {
	t.Parallel()
	admin, name := demoDatabase(t)
	ctx := context.Background()
	dbURL := withDatabase(t, dbtest.AdminURL(), name)

	require.NoError(t, dev.FreshDatabase(ctx, dbURL))
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE left_over (id int)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))
	var comment string
	require.NoError(t, admin.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", name).Scan(&comment))
	require.Contains(t, comment, "atmost demo")

	require.NoError(t, dev.FreshDatabase(ctx, dbURL), "a database the demo created is recreated")
	conn, err = pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var tables int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'left_over'").Scan(&tables))
	require.Zero(t, tables, "created again, empty")
}
