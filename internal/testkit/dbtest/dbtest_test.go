package dbtest_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// Two tests that run at the same time must each see an empty ledger of their own: each writes
// a row, waits until the other has written too, and must still see only its own.
func TestParallelTestsSeeTheirOwnEmptyLedger(t *testing.T) {
	dbtest.SkipInShortLane(t, "its two subtests clone a database each")
	var wrote sync.WaitGroup
	wrote.Add(2)
	names := make(chan string, 2)
	for _, account := range []string{"acct-a", "acct-b"} {
		t.Run(account, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := dbtest.New(t)
			names <- db.Name

			var intents, accounts int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM intents), (SELECT count(*) FROM accounts)`).Scan(&intents, &accounts))
			require.Zero(t, intents, "a fresh ledger holds no intents")
			require.Zero(t, accounts, "a fresh ledger holds no accounts")

			_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ($1, 'sim')`, account)
			require.NoError(t, err)
			wrote.Done()
			wrote.Wait() // both have written before either looks again

			var seen []string
			rows, err := db.Pool.Query(ctx, `SELECT account_id FROM accounts`)
			require.NoError(t, err)
			for rows.Next() {
				var id string
				require.NoError(t, rows.Scan(&id))
				seen = append(seen, id)
			}
			require.NoError(t, rows.Err())
			require.Equal(t, []string{account}, seen)
		})
	}
	t.Cleanup(func() {
		close(names)
		a, b := <-names, <-names
		if a == b {
			t.Errorf("both tests got database %s", a)
		}
	})
}

func TestTransactionsAreSerializableByDefault(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	require.Equal(t, "serializable", isolation(t, db))
}

func TestWithIsolationSetsTheDefaultLevel(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.WithIsolation(dbtest.ReadCommitted))
	require.Equal(t, "read committed", isolation(t, db))
}

func TestEmptyDatabaseHasNoSchema(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t, dbtest.Empty())
	var tables int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&tables))
	require.Zero(t, tables)
}

func TestAppPoolConnectsAsTheApplicationRole(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	var user string
	require.NoError(t, db.AppPool(t).QueryRow(context.Background(), `SELECT current_user`).Scan(&user))
	require.Equal(t, "atmost_app", user)
}

func isolation(t *testing.T, db *dbtest.DB) string {
	t.Helper()
	ctx := context.Background()
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var level string
	require.NoError(t, tx.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&level))
	return level
}
