package migrate_test

// Schema guards that make mutate (scripts/mutations.txt) removes one at a time; each test here
// is the one that must go red.

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/dbtest"
)

// insertIntent inserts an intent in state with the given claim columns (nil for NULL) and
// returns the error.
func insertIntent(ctx context.Context, pool *pgxpool.Pool, n byte, state string, token []byte, epoch, generation *int64, leased bool) error {
	key := make([]byte, 32)
	key[0] = n
	_, err := pool.Exec(ctx, `INSERT INTO intents (delivery_key, account_id, action, request, state, attempt_token, epoch, generation, lease_expires_at)
		VALUES ($1, 'acct-1', 'post', '{}', $2, $3, $4, $5, CASE WHEN $6 THEN now() + INTERVAL '1 minute' END)`,
		key, state, token, epoch, generation, leased)
	return err
}

func withAccount(t *testing.T) (context.Context, *dbtest.DB) {
	t.Helper()
	ctx := context.Background()
	db := dbtest.New(t)
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	require.NoError(t, err)
	return ctx, db
}

// A lease is what lets ExpireLeases touch an intent; only a claimed (pending) or authorized
// intent may hold one, so no sweep can ever move a settled intent.
func TestOnlyClaimedOrAuthorizedIntentsHoldALease(t *testing.T) {
	t.Parallel()
	ctx, db := withAccount(t)
	one := int64(1)
	for i, state := range []string{"pending", "authorized", "published", "failed", "indeterminate", "parked"} {
		gen := int64(i + 1)
		err := insertIntent(ctx, db.Pool, byte(i+1), state, make([]byte, 16), &one, &gen, true)
		if state == "pending" || state == "authorized" {
			require.NoError(t, err, "state %s with a lease", state)
		} else {
			requireSQLState(t, err, "23514", state+" with a lease")
		}
	}
}

// An authorized intent always names the attempt that holds it (token, epoch, generation) and
// its in-flight lease: the fence of Complete and the expiry of the sweeper rest on them.
func TestAnAuthorizedIntentAlwaysHoldsItsClaim(t *testing.T) {
	t.Parallel()
	ctx, db := withAccount(t)
	one, two := int64(1), int64(2)
	token := make([]byte, 16)
	require.NoError(t, insertIntent(ctx, db.Pool, 1, "authorized", token, &one, &two, true))
	for i, missing := range []struct {
		what       string
		token      []byte
		epoch, gen *int64
		leased     bool
	}{
		{"token", nil, &one, &two, true},
		{"epoch", token, nil, &two, true},
		{"generation", token, &one, nil, true},
		{"lease", token, &one, &two, false},
	} {
		err := insertIntent(ctx, db.Pool, byte(i+2), "authorized", missing.token, missing.epoch, missing.gen, missing.leased)
		requireSQLState(t, err, "23514", "authorized without its "+missing.what)
	}
}

// An intent row is never deleted by the services: a deleted delivery key could be submitted,
// claimed and sent again.
func TestAppRoleCannotDeleteIntents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	app := db.AppPool(t)
	for _, stmt := range []string{"DELETE FROM intents", "TRUNCATE intents"} {
		_, err := app.Exec(ctx, stmt)
		requireSQLState(t, err, "42501", stmt)
	}
}

// The restore epoch only moves forward: the services may add the next epoch, never change or
// remove one (which would let claims of an old epoch through the fence again).
func TestAppRoleCannotRewriteEpochs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	app := db.AppPool(t)
	for _, stmt := range []string{"UPDATE epochs SET epoch = epoch", "DELETE FROM epochs", "TRUNCATE epochs"} {
		_, err := app.Exec(ctx, stmt)
		requireSQLState(t, err, "42501", stmt)
	}
	_, err := app.Exec(ctx, `INSERT INTO epochs (epoch, actor) SELECT max(epoch) + 1, 'operator' FROM epochs`)
	require.NoError(t, err, "an epoch bump stays allowed")
}

// The services draw generations and can never set the sequence back (setval), which would
// hand out a fence an older attempt already holds.
func TestAppRoleCannotResetTheGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	app := db.AppPool(t)
	var generation int64
	require.NoError(t, app.QueryRow(ctx, `SELECT nextval('attempt_generation')`).Scan(&generation))
	_, err := app.Exec(ctx, `SELECT setval('attempt_generation', 1)`)
	requireSQLState(t, err, "42501", "setval on attempt_generation")
}
