package ledger_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestBeginManyAnswersEachIntentOnItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	free := e.submit("free")
	claimed := e.claim("claimed")
	done := e.authorized("authorized")
	missing := envelope(t, account, "never submitted").DeliveryKey()

	res, err := e.l.BeginMany(e.ctx, []ledger.BeginRequest{
		{Key: free, RequestHash: requestHash("free")},
		{Key: claimed.Key},
		{Key: done.Key},
		{Key: missing},
	}, lease)
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, free, res[0].Claim.Key)
	requireRefused(t, res[1].Err, ledger.ErrClaimed)
	requireRefused(t, res[2].Err, ledger.ErrInvalidTransition)
	requireRefused(t, res[3].Err, ledger.ErrNotFound)
	require.Equal(t, 1, e.attempts(free))
	require.Equal(t, 1, e.attempts(claimed.Key))

	_, err = e.l.BeginMany(e.ctx, []ledger.BeginRequest{{Key: free}, {Key: free}}, lease)
	require.Error(t, err, "a key twice in one batch is the caller's mistake")
	_, err = e.l.BeginMany(e.ctx, nil, lease)
	require.Error(t, err)
}

// Three intents of one account want the last two tokens of its bucket: the first two in stored
// order get them (one batch stored them in the order that is the reverse of their keys'), the
// third is rate limited.
func TestAuthorizeManySharesTheRateBucketInStoredOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("rate_per_minute", 1)
	e.setPolicy("rate_burst", 2)
	var envs []identity.Envelope
	for i := 0; i < 3; i++ {
		envs = append(envs, envelope(t, account, fmt.Sprintf("rate batch %d", i)))
	}
	slices.SortFunc(envs, func(a, b identity.Envelope) int {
		return -bytes.Compare(a.DeliveryKey().Bytes(), b.DeliveryKey().Bytes())
	})
	stored, err := e.l.Submit(e.ctx, envs)
	require.NoError(t, err)
	var claims []ledger.Claim
	for _, i := range []int{1, 2, 0} { // the batch to authorize in yet another order
		c, err := e.l.Begin(e.ctx, stored[i].Key, requestHash("rate"), lease)
		require.NoError(t, err)
		claims = append(claims, c)
	}
	res, err := e.l.AuthorizeMany(e.ctx, claims, inFlight, contract)
	require.NoError(t, err)
	want := map[identity.DeliveryKey]ledger.Reason{
		stored[0].Key: ledger.ReasonAuthorized, stored[1].Key: ledger.ReasonAuthorized, stored[2].Key: ledger.ReasonRateLimited,
	}
	for i, r := range res {
		require.NoError(t, r.Err)
		require.Equal(t, want[claims[i].Key], r.Authorization.Reason, "claim %d", i)
	}
	var tokens float64
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT tokens FROM rate_buckets`).Scan(&tokens))
	require.Less(t, tokens, 1.0, "the bucket is spent")
}

// Two intents of one account with the same text in one batch (different occurrences): one
// claim on the text, so one is authorized and the other parked as a duplicate.
func TestAuthorizeManyGivesOneTextClaimPerText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var claims []ledger.Claim
	for _, occurrence := range []string{"first", "second"} {
		res, err := e.l.Submit(e.ctx, []identity.Envelope{envelopeWithOccurrence(t, account, "same text", occurrence)})
		require.NoError(t, err)
		c, err := e.l.Begin(e.ctx, res[0].Key, requestHash(occurrence), lease)
		require.NoError(t, err)
		claims = append(claims, c)
	}
	res, err := e.l.AuthorizeMany(e.ctx, claims, inFlight, contract)
	require.NoError(t, err)
	var reasons []ledger.Reason
	for _, r := range res {
		require.NoError(t, r.Err)
		reasons = append(reasons, r.Authorization.Reason)
	}
	require.ElementsMatch(t, []ledger.Reason{ledger.ReasonAuthorized, ledger.ReasonDuplicateText}, reasons)
}

func TestCompleteManyFencesEachReportOnItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good := e.authorized("good")
	stale := e.authorized("stale")
	e.expireLease(stale.Key)
	_, err := e.l.ExpireLeases(e.ctx, 10)
	require.NoError(t, err)
	res, err := e.l.CompleteMany(e.ctx, []ledger.Report{
		{Claim: good, Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: "g", Confirmed: true}},
		{Claim: stale, Outcome: ledger.Outcome{Result: ledger.Sent, ObjectID: "s", Confirmed: true}},
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.Equal(t, ledger.Published, res[0].Completion.State)
	requireRefused(t, res[1].Err, ledger.ErrFenced)
	require.Equal(t, 2, e.count(`SELECT count(*) FROM attempt_evidence WHERE outcome = 'success'`), "both outcomes are kept")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE fenced`))
}

// Overlapping batches from many workers lock rows in key order: they never deadlock, and
// every intent is claimed exactly once between them.
func TestOverlappingBatchesClaimEachIntentOnce(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		const intents, workers = 40, 6
		var keys []identity.DeliveryKey
		for i := 0; i < intents; i++ {
			keys = append(keys, e.submit(fmt.Sprintf("overlap %d", i)))
		}
		var wg sync.WaitGroup
		claimed := make(chan ledger.Claim, intents*workers)
		for w := 0; w < workers; w++ {
			l := e.ledgerWith(ledger.Config{Actor: fmt.Sprintf("worker-%d", w)})
			// Each worker asks for every intent, in its own order.
			order := slices.Clone(keys)
			if w%2 == 1 {
				slices.Reverse(order)
			}
			wg.Go(func() {
				var reqs []ledger.BeginRequest
				for _, k := range order {
					reqs = append(reqs, ledger.BeginRequest{Key: k, RequestHash: requestHash("o")})
				}
				res, err := l.BeginMany(e.ctx, reqs, lease)
				require.NoError(t, err)
				var won []ledger.Claim
				for _, r := range res {
					if r.Err == nil {
						claimed <- r.Claim
						won = append(won, r.Claim)
					} else if !errors.Is(r.Err, ledger.ErrClaimed) {
						// Another worker won it and may have authorized it already.
						requireRefused(t, r.Err, ledger.ErrInvalidTransition)
					}
				}
				if len(won) > 0 {
					auth, err := l.AuthorizeMany(e.ctx, won, inFlight, contract)
					require.NoError(t, err)
					for _, a := range auth {
						require.NoError(t, a.Err)
					}
				}
			})
		}
		wg.Wait()
		close(claimed)
		require.Len(t, claimed, intents, "every intent claimed exactly once")
		require.Equal(t, intents, e.count(`SELECT count(*) FROM attempts`))
		require.Equal(t, intents, e.count(`SELECT count(*) FROM intents WHERE state = 'authorized'`))
	})
}

// Workers that submit, begin and authorize batches spanning many accounts take the accounts'
// rate buckets and text claims in key order, so at READ COMMITTED (where any restart is a
// deadlock) none of them ever restarts a transaction.
func TestBatchesAcrossAccountsNeverDeadlock(t *testing.T) {
	t.Parallel()
	e := newEnvAt(t, pgx.ReadCommitted)
	e.setPolicy("rate_per_minute", 100000)
	e.setPolicy("rate_burst", 100000)
	const accounts, workers, rounds, per = 12, 8, 20, 12
	for a := 0; a < accounts; a++ {
		e.exec(`INSERT INTO accounts (account_id, platform) VALUES ($1, 'sim')`, fmt.Sprintf("acct-%02d", a))
	}
	var wg sync.WaitGroup
	ledgers := make([]*ledger.Ledger, workers)
	for w := 0; w < workers; w++ {
		ledgers[w] = e.ledgerWith(ledger.Config{Actor: fmt.Sprintf("worker-%d", w), MaxRetries: 1000})
		l := ledgers[w]
		rng := rand.New(rand.NewPCG(uint64(w), 7))
		wg.Go(func() {
			for r := 0; r < rounds; r++ {
				var envs []identity.Envelope
				for i := 0; i < per; i++ {
					envs = append(envs, envelope(t, fmt.Sprintf("acct-%02d", rng.IntN(accounts)), fmt.Sprintf("w%d r%d i%d", w, r, i)))
				}
				res, err := l.Submit(e.ctx, envs)
				if !assert.NoError(t, err) {
					return
				}
				var reqs []ledger.BeginRequest
				for _, s := range res {
					reqs = append(reqs, ledger.BeginRequest{Key: s.Key, RequestHash: requestHash("x")})
				}
				begun, err := l.BeginMany(e.ctx, reqs, lease)
				if !assert.NoError(t, err) {
					return
				}
				var claims []ledger.Claim
				for _, b := range begun {
					if assert.NoError(t, b.Err) {
						claims = append(claims, b.Claim)
					}
				}
				auth, err := l.AuthorizeMany(e.ctx, claims, inFlight, contract)
				if !assert.NoError(t, err) {
					return
				}
				for _, a := range auth {
					assert.NoError(t, a.Err)
					assert.True(t, a.Authorization.Authorized(), "reason %s", a.Authorization.Reason)
				}
			}
		})
	}
	wg.Wait()
	for w, l := range ledgers {
		require.Zero(t, l.Retries(), "worker %d restarted a transaction: a deadlock", w)
	}
}
