package migrate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/migrate"
	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// The tables operators and tools rely on, by name.
var ledgerTables = []string{
	"accounts", "attempt_evidence", "attempts", "control_history", "epochs", "history", "intents", "outbox",
	"policies", "reconciliations", "rejects", "source_heads", "switches", "text_claims",
}

// The append-only tables: the application role may INSERT and SELECT there, nothing more.
var appendOnlyTables = []string{"attempts", "attempt_evidence", "history", "reconciliations", "rejects", "control_history"}

func TestUpFromEmptyAppliesEveryMigrationOnceThenNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.Empty())
	latest, err := migrate.Latest()
	require.NoError(t, err)

	applied, err := migrate.Up(ctx, db.URL, migrate.Options{})
	require.NoError(t, err)
	require.Len(t, applied, int(latest))
	for i, a := range applied {
		require.Equal(t, int64(i+1), a.Version, "migrations are numbered from 1 without gaps")
	}
	before := schemaSnapshot(t, db.Pool)

	again, err := migrate.Up(ctx, db.URL, migrate.Options{})
	require.NoError(t, err)
	require.Empty(t, again, "a second run applies nothing")
	require.Equal(t, before, schemaSnapshot(t, db.Pool), "a second run changes nothing")

	current, err := migrate.Current(ctx, db.URL)
	require.NoError(t, err)
	require.Equal(t, latest, current)
	for _, table := range ledgerTables {
		require.Contains(t, before, "table "+table, "table %s exists", table)
	}
}

// Migrators running at the same time on one database serialize on goose's table lock: every
// migration is applied exactly once between them, and neither fails.
func TestConcurrentMigratorsApplyEachMigrationOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.Empty())
	latest, err := migrate.Latest()
	require.NoError(t, err)

	var wg sync.WaitGroup
	results := make([][]migrate.Applied, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = migrate.Up(ctx, db.URL, migrate.Options{}) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, int(latest), len(results[0])+len(results[1]))

	var advisory int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'`).Scan(&advisory))
	require.Zero(t, advisory)
}

func TestUpReportsAMissingDatabaseAndCanCreateIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t, dbtest.Empty())
	missing := strings.Replace(db.URL, "/"+db.Name+"?", "/"+db.Name+"_absent?", 1)

	_, err := migrate.Up(ctx, missing, migrate.Options{})
	require.ErrorIs(t, err, migrate.ErrDatabaseMissing)
	require.ErrorContains(t, err, "--create-database")

	applied, err := migrate.Up(ctx, missing, migrate.Options{CreateDatabase: true})
	t.Cleanup(func() {
		_, _ = db.Pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{db.Name + "_absent"}.Sanitize()+" WITH (FORCE)")
	})
	require.NoError(t, err)
	require.NotEmpty(t, applied)
}

func TestAppRoleCannotUpdateOrDeleteAppendOnlyTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	app := db.AppPool(t)
	for _, table := range appendOnlyTables {
		for _, stmt := range []string{
			"UPDATE " + table + " SET delivery_key = delivery_key",
			"DELETE FROM " + table,
			"TRUNCATE " + table,
		} {
			if table == "rejects" || table == "control_history" {
				stmt = strings.Replace(stmt, "delivery_key = delivery_key", "reason = reason", 1)
			}
			_, err := app.Exec(ctx, stmt)
			requireSQLState(t, err, "42501", stmt)
		}
		// The grants are exact: reading and appending stay allowed.
		for _, privilege := range []string{"SELECT", "INSERT"} {
			var ok bool
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT has_table_privilege('atmost_app', $1, $2)`, table, privilege).Scan(&ok))
			require.True(t, ok, "atmost_app may %s on %s", privilege, table)
		}
	}
}

// Appending through the application role works end to end: the whole path from account to
// history row, so the insert-only grants are not a role that can do nothing at all.
func TestAppRoleCanAppendHistoryAndAdvanceIntents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	app := db.AppPool(t)
	key := make([]byte, 32)
	key[0] = 1
	_, err := app.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	require.NoError(t, err)
	_, err = app.Exec(ctx, `INSERT INTO intents (delivery_key, account_id, action, request) VALUES ($1, 'acct-1', 'post', '{}')`, key)
	require.NoError(t, err)
	_, err = app.Exec(ctx, `INSERT INTO history (delivery_key, seq, to_state, actor) VALUES ($1, 1, 'pending', 'ingest')`, key)
	require.NoError(t, err)
	_, err = app.Exec(ctx, `INSERT INTO outbox (delivery_key, seq) VALUES ($1, 1)`, key)
	require.NoError(t, err)
	_, err = app.Exec(ctx, `UPDATE intents SET state = 'parked', transition_seq = 2 WHERE delivery_key = $1`, key)
	require.NoError(t, err)
	_, err = app.Exec(ctx, `DELETE FROM outbox WHERE delivery_key = $1`, key)
	require.NoError(t, err)
	var generation int64
	require.NoError(t, app.QueryRow(ctx, `SELECT nextval('attempt_generation')`).Scan(&generation))
	require.Positive(t, generation)
}

func TestIntentStateAllowsExactlyTheSixStates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	require.NoError(t, err)
	states := []string{"pending", "authorized", "published", "failed", "indeterminate", "parked"}
	for i, state := range append(states, "in_flight", "claimed", "done", "") {
		key := make([]byte, 32)
		key[0] = byte(i + 1)
		// authorized requires a live claim; give every row one so only the state is under test.
		_, err := db.Pool.Exec(ctx, `INSERT INTO intents (delivery_key, account_id, action, request, state, attempt_token, epoch, generation, lease_expires_at)
			VALUES ($1, 'acct-1', 'post', '{}', $2, $3, 1, $4, CASE WHEN $2 IN ('pending', 'authorized') THEN now() END)`,
			key, state, make([]byte, 16), int64(i+1))
		if i < len(states) {
			require.NoError(t, err, "state %q", state)
		} else {
			requireSQLState(t, err, "23514", "state "+state)
		}
	}
}

func TestDeliveryKeysAndAttemptTokensAreUnique(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	key := make([]byte, 32)
	token := make([]byte, 16)
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	require.NoError(t, err)
	insertIntent := `INSERT INTO intents (delivery_key, account_id, action, request) VALUES ($1, 'acct-1', 'post', '{}')`
	_, err = db.Pool.Exec(ctx, insertIntent, key)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, insertIntent, key)
	requireSQLState(t, err, "23505", "second intent with the same delivery key")

	insertAttempt := `INSERT INTO attempts (attempt_token, delivery_key, account_id, action, request_hash, credential_version, epoch, generation)
		VALUES ($1, $2, 'acct-1', 'post', $3, 1, 1, $4)`
	_, err = db.Pool.Exec(ctx, insertAttempt, token, key, make([]byte, 32), 1)
	require.NoError(t, err)
	_, err = db.Pool.Exec(ctx, insertAttempt, token, key, make([]byte, 32), 2)
	requireSQLState(t, err, "23505", "second attempt with the same token")
	other := append([]byte{}, token...)
	other[0] = 9
	_, err = db.Pool.Exec(ctx, insertAttempt, other, key, make([]byte, 32), 1)
	requireSQLState(t, err, "23505", "second attempt with the same (epoch, generation)")
}

// The fencing generation comes from a sequence that no table owns (so no TRUNCATE or table
// rebuild resets it) and that hands out one value at a time (CACHE 1).
func TestGenerationSequenceIsStandaloneWithCacheOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	var cache int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT cache_size FROM pg_sequences WHERE sequencename = 'attempt_generation'`).Scan(&cache))
	require.Equal(t, int64(1), cache)
	var owners int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
		WHERE c.relname = 'attempt_generation' AND d.deptype IN ('a', 'i')`).Scan(&owners))
	require.Zero(t, owners, "no table owns the generation sequence")

	var first, second int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT nextval('attempt_generation')`).Scan(&first))
	_, err := db.Pool.Exec(ctx, `TRUNCATE attempts, attempt_evidence, reconciliations`)
	require.NoError(t, err)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT nextval('attempt_generation')`).Scan(&second))
	require.Greater(t, second, first, "a TRUNCATE does not reset the generation")
}

func TestFirstEpochAndDefaultPolicyAreSeeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	var epoch int64
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT max(epoch) FROM epochs`).Scan(&epoch))
	require.Equal(t, int64(1), epoch)
	var cap int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT attempt_cap FROM policies WHERE scope = ''`).Scan(&cap))
	require.Positive(t, cap)
	_, err := db.Pool.Exec(ctx, `UPDATE policies SET attempt_cap = NULL WHERE scope = ''`)
	requireSQLState(t, err, "23514", "the default policy must set every column")
}

func requireSQLState(t *testing.T, err error, code, what string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%s: want SQLSTATE %s, got %v", what, code, err)
	require.Equal(t, code, pgErr.Code, "%s: %s", what, pgErr.Message)
}

// schemaSnapshot lists every table, column, constraint, index, sequence and grant of the public
// schema, one line each, so two snapshots compare equal only if nothing changed.
func schemaSnapshot(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT 'table ' || table_name FROM information_schema.tables WHERE table_schema = 'public'
		UNION ALL SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '')
			FROM information_schema.columns WHERE table_schema = 'public'
		UNION ALL SELECT 'constraint ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = 'public'::regnamespace
		UNION ALL SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
		UNION ALL SELECT 'sequence ' || sequencename || ' ' || last_value::text FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL
		UNION ALL SELECT 'grant ' || grantee || ' ' || table_name || ' ' || privilege_type FROM information_schema.role_table_grants WHERE table_schema = 'public'
		UNION ALL SELECT 'row goose ' || count(*)::text FROM goose_db_version
		ORDER BY 1`)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}
