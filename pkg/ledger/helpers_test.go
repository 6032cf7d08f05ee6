package ledger_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

const (
	account  = "acct-1"
	lease    = time.Minute
	inFlight = 2 * time.Minute
	contract = "sim/1"
)

// env is one test's ledger on its own database, with one configured account. The ledger
// connects as the application role, as the services do, so every operation also proves the
// grants suffice; pool (the owner) is for setting scenes and looking at rows.
type env struct {
	t    testing.TB
	ctx  context.Context
	db   *dbtest.DB
	pool *pgxpool.Pool
	app  *pgxpool.Pool
	iso  pgx.TxIsoLevel
	l    *ledger.Ledger
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvAt(t, pgx.Serializable)
}

// isolations are the levels the concurrency tests run at: the guards live in the statements,
// so they must hold at both.
var isolations = []pgx.TxIsoLevel{pgx.Serializable, pgx.ReadCommitted}

// newEnvAt gives the test a ledger whose transactions (and the pool's default) run at
// isolation.
func newEnvAt(t testing.TB, isolation pgx.TxIsoLevel) *env {
	t.Helper()
	level := dbtest.Serializable
	if isolation == pgx.ReadCommitted {
		level = dbtest.ReadCommitted
	}
	db := dbtest.New(t, dbtest.WithIsolation(level))
	e := &env{t: t, ctx: context.Background(), db: db, pool: db.Pool, app: db.AppPool(t), iso: isolation}
	e.l = e.ledgerWith(ledger.Config{Actor: "test", Isolation: isolation})
	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ($1, 'sim')`, account)
	// Tests that are not about the rate limit must not meet it; those that are set their own.
	e.setPolicy("rate_per_minute", 0)
	// Nor account health's thresholds: they set their own (healthEnv).
	e.setPolicy("trip_failures", 1_000_000)
	e.setPolicy("trip_unknowns", 1_000_000)
	return e
}

// ledgerWith is another Ledger on the same database, as another process would have.
func (e *env) ledgerWith(cfg ledger.Config) *ledger.Ledger {
	if cfg.Isolation == "" {
		cfg.Isolation = e.iso
	}
	l, err := ledger.New(e.app, cfg)
	require.NoError(e.t, err)
	return l
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	_, err := e.pool.Exec(e.ctx, sql, args...)
	require.NoError(e.t, err, sql)
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(e.ctx, sql, args...).Scan(&n), sql)
	return n
}

// envelope builds a post intent with text for account.
func envelope(t testing.TB, acct, text string) identity.Envelope {
	t.Helper()
	req, err := json.Marshal(map[string]string{"text": text})
	require.NoError(t, err)
	e, err := identity.NewEnvelope(acct, "post", "", req, "", nil)
	require.NoError(t, err)
	return e
}

// envelopeWithOccurrence is a post meant as a new occurrence of the same request.
func envelopeWithOccurrence(t testing.TB, acct, text, occurrence string) identity.Envelope {
	t.Helper()
	req, err := json.Marshal(map[string]string{"text": text})
	require.NoError(t, err)
	e, err := identity.NewEnvelope(acct, "post", "", req, occurrence, nil)
	require.NoError(t, err)
	return e
}

// submitWithSource stores a new post resting on a version of a source (body) and returns its
// key; a new version becomes the source's stored head.
func (e *env) submitWithSource(text, sourceID, body string) identity.DeliveryKey {
	e.t.Helper()
	version, _, err := identity.NewSourceVersion(sourceID, body)
	require.NoError(e.t, err)
	req, err := json.Marshal(map[string]string{"text": text})
	require.NoError(e.t, err)
	env, err := identity.NewEnvelope(account, "post", "", req, "", &identity.Source{ID: sourceID, Version: version})
	require.NoError(e.t, err)
	res, err := e.l.Submit(e.ctx, []identity.Envelope{env})
	require.NoError(e.t, err)
	require.Equal(e.t, ledger.Created, res[0].Outcome)
	return res[0].Key
}

// claimWithSource submits a post resting on a version of a source and begins an attempt.
func (e *env) claimWithSource(text, sourceID, body string) ledger.Claim {
	e.t.Helper()
	c, err := e.l.Begin(e.ctx, e.submitWithSource(text, sourceID, body), requestHash(text), lease)
	require.NoError(e.t, err)
	return c
}

// submit stores a new post intent and returns its key.
func (e *env) submit(text string) identity.DeliveryKey {
	e.t.Helper()
	res, err := e.l.Submit(e.ctx, []identity.Envelope{envelope(e.t, account, text)})
	require.NoError(e.t, err)
	require.Equal(e.t, ledger.Created, res[0].Outcome)
	return res[0].Key
}

func requestHash(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// claim submits an intent and begins one attempt on it.
func (e *env) claim(text string) ledger.Claim {
	e.t.Helper()
	key := e.submit(text)
	c, err := e.l.Begin(e.ctx, key, requestHash(text), lease)
	require.NoError(e.t, err)
	return c
}

// authorized submits, begins and authorizes one intent.
func (e *env) authorized(text string) ledger.Claim {
	e.t.Helper()
	c := e.claim(text)
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(e.t, err)
	require.Equal(e.t, ledger.Authorized, a.State, "reason %s", a.Reason)
	return c
}

func (e *env) state(key identity.DeliveryKey) ledger.State {
	e.t.Helper()
	in, err := e.l.Get(e.ctx, key)
	require.NoError(e.t, err)
	return in.State
}

func (e *env) intent(key identity.DeliveryKey) ledger.Intent {
	e.t.Helper()
	in, err := e.l.Get(e.ctx, key)
	require.NoError(e.t, err)
	return in
}

// expireLease moves the intent's lease deadline into the past, as if its worker had stalled.
func (e *env) expireLease(key identity.DeliveryKey) {
	e.t.Helper()
	e.exec(`UPDATE intents SET lease_expires_at = now() - INTERVAL '1 second' WHERE delivery_key = $1 AND lease_expires_at IS NOT NULL`, key.Bytes())
}

func (e *env) attempts(key identity.DeliveryKey) int {
	return e.count(`SELECT count(*) FROM attempts WHERE delivery_key = $1`, key.Bytes())
}

// requireRefused asserts err is a refusal matching want.
func requireRefused(t testing.TB, err, want error) {
	t.Helper()
	require.ErrorIs(t, err, want)
	var r *ledger.RefusedError
	require.ErrorAs(t, err, &r, "refusals are RefusedErrors")
}

func (e *env) setPolicy(column string, value any) {
	e.t.Helper()
	e.exec(fmt.Sprintf(`UPDATE policies SET %s = $1 WHERE scope = ''`, pgx.Identifier{column}.Sanitize()), value)
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// loseFirstCommitAnswer makes l's first COMMIT go through and answer lost instead, as a
// connection cut during COMMIT does; every later COMMIT answers as it is.
func loseFirstCommitAnswer(l *ledger.Ledger, lost error) {
	commits := 0
	ledger.SetCommit(l, func(ctx context.Context, tx pgx.Tx) error {
		commits++
		if err := tx.Commit(ctx); err != nil || commits > 1 {
			return err
		}
		return lost
	})
}
