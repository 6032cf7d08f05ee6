package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// forEachIsolation runs test at SERIALIZABLE and at READ COMMITTED: the guards live in the
// statements that change the rows, so they must hold at both (docs/design.md#the-sql-dialect).
func forEachIsolation(t *testing.T, test func(t *testing.T, e *env)) {
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			test(t, newEnvAt(t, iso))
		})
	}
}

func TestConcurrentBeginsOpenExactlyOneAttempt(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		key := e.submit("race to begin")
		const workers = 16
		var wg sync.WaitGroup
		claims := make(chan ledger.Claim, workers)
		errs := make(chan error, workers)
		start := make(chan struct{})
		for i := 0; i < workers; i++ {
			l := e.ledgerWith(ledger.Config{Actor: fmt.Sprintf("worker-%d", i)})
			wg.Go(func() {
				<-start
				c, err := l.Begin(e.ctx, key, requestHash("race to begin"), lease)
				if err != nil {
					errs <- err
					return
				}
				claims <- c
			})
		}
		close(start)
		wg.Wait()
		close(claims)
		close(errs)
		require.Len(t, claims, 1, "exactly one Begin wins")
		for err := range errs {
			requireRefused(t, err, ledger.ErrClaimed)
		}
		require.Equal(t, 1, e.attempts(key))
		require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND reason = 'claimed'`, key.Bytes()))
	})
}

// A worker that crashed after Begin and before Authorize comes back (or another takes over)
// while the claim is live: it cannot open a second attempt.
func TestBeginAfterACrashBeforeAuthorizeSeesTheLiveClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.claim("crash after begin")
	restarted := e.ledgerWith(ledger.Config{Actor: "restarted-worker"})
	_, err := restarted.Begin(e.ctx, c.Key, requestHash("crash after begin"), lease)
	requireRefused(t, err, ledger.ErrClaimed)
	require.Equal(t, 1, e.attempts(c.Key))
}

// Pre-authorization stale worker: its lease expired, so its Authorize is refused and the
// intent is free for the next Begin, which closes the stale attempt as abandoned.
func TestStaleWorkerBeforeAuthorizationIsRefusedAndTheIntentFreed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stale := e.claim("slow worker")
	e.expireLease(stale.Key)

	_, err := e.l.Authorize(e.ctx, stale, inFlight, contract)
	requireRefused(t, err, ledger.ErrLeaseLost)
	require.Equal(t, ledger.Pending, e.state(stale.Key))

	fresh, err := e.l.Begin(e.ctx, stale.Key, requestHash("slow worker"), lease)
	require.NoError(t, err)
	require.Greater(t, fresh.Generation, stale.Generation)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE attempt_token = $1 AND outcome = 'abandoned'`, stale.Token.Bytes()))

	// The stale worker wakes up: it is refused everywhere.
	_, err = e.l.Authorize(e.ctx, stale, inFlight, contract)
	requireRefused(t, err, ledger.ErrLeaseLost)
	a, err := e.l.Authorize(e.ctx, fresh, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized())
}

// Post-authorization: a vanished worker's intent is never claimable again; only the expiry of
// its lease moves it, to indeterminate, and nothing moves it back to pending.
func TestVanishedAuthorizedWorkerIsNeverRecoveredToPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("vanished")
	_, err := e.l.Begin(e.ctx, c.Key, requestHash("vanished"), lease)
	requireRefused(t, err, ledger.ErrInvalidTransition)

	e.expireLease(c.Key)
	_, err = e.l.Begin(e.ctx, c.Key, requestHash("vanished"), lease)
	requireRefused(t, err, ledger.ErrInvalidTransition)
	n, err := e.l.ExpireLeases(e.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, ledger.Expired{Indeterminate: 1, Changed: []identity.DeliveryKey{c.Key}}, n)
	in := e.intent(c.Key)
	require.Equal(t, ledger.Indeterminate, in.State)
	require.Equal(t, ledger.ReasonLeaseExpired, in.Reason)

	_, err = e.l.Begin(e.ctx, c.Key, requestHash("vanished"), lease)
	requireRefused(t, err, ledger.ErrInvalidTransition)
	requireRefused(t, e.l.Retry(e.ctx, c.Key), ledger.ErrInvalidTransition)
	again, err := e.l.ExpireLeases(e.ctx, 100)
	require.NoError(t, err)
	require.Zero(t, again)
	require.Equal(t, ledger.Indeterminate, e.state(c.Key))
	require.Equal(t, 1, e.attempts(c.Key))
}

// The evidence an expired lease leaves says what the expiry proves: an expired claim was never
// authorized, so nothing was sent (abandoned); an expired authorization may have sent
// (unknown, lease_expired), and the person resolving it must not read that nothing was.
func TestAnExpiredLeaseLeavesEvidenceOfWhatItProves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	claimed := e.claim("claimed, then silence")
	authorized := e.authorized("authorized, then silence")
	e.expireLease(claimed.Key)
	e.expireLease(authorized.Key)
	_, err := e.l.ExpireLeases(e.ctx, 100)
	require.NoError(t, err)
	for _, want := range []struct {
		c       ledger.Claim
		outcome string
		reason  ledger.Reason
	}{
		{claimed, "abandoned", ledger.ReasonAbandoned},
		{authorized, "unknown", ledger.ReasonLeaseExpired},
	} {
		rec, err := e.l.Inspect(e.ctx, want.c.Key)
		require.NoError(t, err)
		require.Len(t, rec.Evidence, 1)
		ev := rec.Evidence[0]
		require.Equal(t, want.c.Token, ev.Token)
		require.Equal(t, want.outcome, ev.Result, "evidence of %s", want.reason)
		require.Equal(t, want.reason, ev.Reason)
		require.False(t, ev.Fenced)
	}
}

func TestExpireLeasesAbandonsClaimsAndFreesThem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.claim("claimed, then silence")
	e.expireLease(c.Key)
	n, err := e.l.ExpireLeases(e.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, ledger.Expired{Abandoned: 1, Changed: []identity.DeliveryKey{c.Key}}, n)
	in := e.intent(c.Key)
	require.Equal(t, ledger.Pending, in.State)
	require.Equal(t, ledger.ReasonAbandoned, in.Reason)
	require.Nil(t, in.LeaseExpiresAt)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1 AND dispatch AND seq = $2`, c.Key.Bytes(), in.Seq),
		"a freed intent gets a dispatch work item")
	_, err = e.l.Authorize(e.ctx, c, inFlight, contract)
	requireRefused(t, err, ledger.ErrLeaseLost)
}

// Two sweepers at once: every expired lease is ended exactly once between them.
func TestConcurrentSweepersExpireEachLeaseOnce(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		const n = 20
		for i := 0; i < n; i++ {
			c := e.authorized(fmt.Sprintf("sweep %d", i))
			e.expireLease(c.Key)
		}
		var wg sync.WaitGroup
		results := make([]ledger.Expired, 4)
		for i := range results {
			l := e.ledgerWith(ledger.Config{Actor: fmt.Sprintf("sweeper-%d", i)})
			wg.Go(func() {
				var err error
				results[i], err = l.ExpireLeases(e.ctx, n)
				require.NoError(t, err)
			})
		}
		wg.Wait()
		total := 0
		for _, r := range results {
			total += r.Indeterminate
		}
		require.Equal(t, n, total)
		require.Equal(t, n, e.count(`SELECT count(*) FROM history WHERE reason = 'lease_expired'`))
	})
}

// Fenced recovery: A claims generation 1 and stalls, its lease expires, B claims generation 2
// and completes. A's late report is refused, kept as evidence, and B's verdict stands.
func TestFencedLateCompleteIsRefusedAndKeptAsEvidence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.claim("fenced")
	e.expireLease(a.Key)
	workerB := e.ledgerWith(ledger.Config{Actor: "worker-b"})
	b, err := workerB.Begin(e.ctx, a.Key, requestHash("fenced"), lease)
	require.NoError(t, err)
	require.Greater(t, b.Generation, a.Generation)
	auth, err := workerB.Authorize(e.ctx, b, inFlight, contract)
	require.NoError(t, err)
	require.True(t, auth.Authorized())
	_, err = workerB.Complete(e.ctx, b, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)

	_, err = e.l.Complete(e.ctx, a, ledger.Outcome{Result: ledger.Sent, ObjectID: "late", Confirmed: true})
	requireRefused(t, err, ledger.ErrFenced)
	in := e.intent(a.Key)
	require.Equal(t, ledger.Failed, in.State, "B's verdict stands")
	require.Empty(t, in.ObjectID)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE attempt_token = $1 AND fenced AND outcome = 'success' AND object_id = 'late'`, a.Token.Bytes()))
}

// A completion that arrives after the sweeper made the intent indeterminate is evidence, not
// a state change: the reconciler reads it before it spends its lookup.
func TestCompleteAfterExpiryIsEvidenceOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("late answer")
	e.expireLease(c.Key)
	_, err := e.l.ExpireLeases(e.ctx, 10)
	require.NoError(t, err)
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj", Confirmed: true})
	requireRefused(t, err, ledger.ErrFenced)
	require.Equal(t, ledger.Indeterminate, e.state(c.Key))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE attempt_token = $1 AND fenced`, c.Token.Bytes()))
}

func TestEpochBumpRefusesEveryClaimOfTheOldEpoch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	claimed := e.claim("old epoch, claimed")
	authorized := e.authorized("old epoch, authorized")
	e.exec(`INSERT INTO epochs (epoch, actor, reason) VALUES (2, 'operator', 'restore')`)

	_, err := e.l.Authorize(e.ctx, claimed, inFlight, contract)
	requireRefused(t, err, ledger.ErrFenced)
	require.Equal(t, ledger.Pending, e.state(claimed.Key))

	// An authorized worker of the old epoch keeps its authorization until its outcome or its
	// lease decides; a new claim is stamped with the new epoch.
	e.expireLease(claimed.Key)
	next, err := e.l.Begin(e.ctx, claimed.Key, requestHash("old epoch, claimed"), lease)
	require.NoError(t, err)
	require.Equal(t, int64(2), next.Epoch)
	_ = authorized
}

func TestRequestHashIsBoundToTheAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.claim("bound")
	other := c
	other.RequestHash = requestHash("something else")
	_, err := e.l.Authorize(e.ctx, other, inFlight, contract)
	requireRefused(t, err, ledger.ErrRequestMismatch)
	require.Equal(t, ledger.Pending, e.state(c.Key))
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized())
}

func TestATokenFromAnotherAttemptIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.claim("token")
	forged := c
	forged.Generation++
	_, err := e.l.Authorize(e.ctx, forged, inFlight, contract)
	requireRefused(t, err, ledger.ErrFenced)
	other := e.claim("other intent")
	swapped := c
	swapped.Token = other.Token
	_, err = e.l.Authorize(e.ctx, swapped, inFlight, contract)
	requireRefused(t, err, ledger.ErrLeaseLost)
}

// The transaction helper restarts the WHOLE transaction when COMMIT itself reports a
// serialization failure, and the operation then takes effect exactly once.
func TestTransactionRestartsAfterASerializationFailureAtCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.submit("restart me")
	failures := 2
	ledger.SetCommit(e.l, func(ctx context.Context, tx pgx.Tx) error {
		if failures > 0 {
			failures--
			_ = tx.Rollback(ctx) // the server threw the work away, as a failed COMMIT does
			return &pgconn.PgError{Code: "40001", Message: "could not serialize access (injected)"}
		}
		return tx.Commit(ctx)
	})
	before := e.l.Retries()
	c, err := e.l.Begin(e.ctx, key, requestHash("restart me"), lease)
	require.NoError(t, err)
	require.Equal(t, uint64(2), e.l.Retries()-before)
	require.Equal(t, 1, e.attempts(key), "the restarted transaction took effect once")
	require.Equal(t, c.Token, e.intent(key).Token)
}

func TestTransactionGivesUpAfterMaxRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := e.ledgerWith(ledger.Config{MaxRetries: 3})
	ledger.SetCommit(l, func(ctx context.Context, tx pgx.Tx) error {
		_ = tx.Rollback(ctx)
		return &pgconn.PgError{Code: "40P01", Message: "deadlock detected (injected)"}
	})
	_, err := l.Submit(e.ctx, nil)
	require.NoError(t, err, "an empty batch runs no transaction")
	_, err = l.Submit(e.ctx, []identity.Envelope{envelope(t, account, "never")})
	require.ErrorIs(t, err, ledger.ErrRetriesExhausted)
	require.Equal(t, uint64(3), l.Retries())
	require.Zero(t, e.count(`SELECT count(*) FROM intents`))
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr))
}

// An ambiguous COMMIT may have committed: CockroachDB's 40003 (statement_completion_unknown,
// "result is ambiguous"), or a connection that broke while COMMIT was under way on either
// database. The transaction helper never restarts it, and what it returns is neither a refusal
// nor ErrRetriesExhausted (the dispatcher takes that one for "certainly not committed" and
// authorizes again): an Authorize that reports it must never be read as not-authorized. Here
// the COMMIT did go through, as it may: the intent IS authorized (docs/cockroachdb.md#retries-and-ambiguous-commits).
func TestAnAmbiguousCommitOfAuthorizeIsNeitherRestartedNorARefusal(t *testing.T) {
	t.Parallel()
	for name, ambiguous := range map[string]error{
		"statement completion unknown":  &pgconn.PgError{Code: "40003", Message: "result is ambiguous (injected)"},
		"connection lost during commit": fmt.Errorf("commit: %w", io.ErrUnexpectedEOF),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c := e.claim("committed, or not?")
			l := e.ledgerWith(ledger.Config{Actor: "worker"})
			commits := 0
			ledger.SetCommit(l, func(ctx context.Context, tx pgx.Tx) error {
				commits++
				if err := tx.Commit(ctx); err != nil || commits > 1 {
					return err
				}
				return ambiguous // committed, and the answer lost
			})
			_, err := l.Authorize(e.ctx, c, inFlight, contract)
			require.ErrorIs(t, err, ambiguous)
			var r *ledger.RefusedError
			require.False(t, errors.As(err, &r), "an ambiguous commit is no refusal: %v", err)
			require.NotErrorIs(t, err, ledger.ErrRetriesExhausted)
			require.Equal(t, 1, commits, "never restarted")
			require.Zero(t, l.Retries())
			in := e.intent(c.Key)
			require.Equal(t, ledger.Authorized, in.State, "the commit went through")
			require.Equal(t, c.Token, in.Token)
			require.Equal(t, 1, in.AttemptsAuthorized)
			require.Equal(t, 1, e.authorizedHistory(c.Key))
		})
	}
}

// A completion whose COMMIT went through while its answer was lost is reported again by the
// dispatcher: the repeat answers as the first landed, writes no second evidence row (the first
// is unfenced) and no fenced one, which would tell a person of a newer attempt that never was.
func TestARepeatedCompleteAfterALostAnswerAnswersAsItLanded(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		c := e.authorized("completed, and the answer lost")
		l := e.ledgerWith(ledger.Config{Actor: "worker"})
		lost := fmt.Errorf("commit: %w", io.ErrUnexpectedEOF)
		loseFirstCommitAnswer(l, lost)
		o := ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true}
		_, err := l.Complete(e.ctx, c, o)
		require.ErrorIs(t, err, lost)
		got, err := l.Complete(e.ctx, c, o)
		require.NoError(t, err, "the attempt's own completion, not a fence")
		require.True(t, got.Repeated)
		require.Equal(t, ledger.Published, got.State)
		require.Equal(t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE delivery_key = $1`, c.Key.Bytes()))
		require.Zero(t, e.count(`SELECT count(*) FROM attempt_evidence WHERE delivery_key = $1 AND fenced`, c.Key.Bytes()))
		require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND from_state = 'authorized'`, c.Key.Bytes()))

		// A report of the same attempt naming another object is no repeat: fenced, and kept.
		_, err = l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-other", Confirmed: true})
		requireRefused(t, err, ledger.ErrFenced)
		require.Equal(t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE delivery_key = $1 AND fenced AND object_id = 'obj-other'`, c.Key.Bytes()))
	})
}

// A late report of an earlier attempt is still fenced, though the intent was completed: only an
// attempt's own landed completion makes a repeat.
func TestALateReportOfAnotherAttemptIsNoRepeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("expired, then another attempt completed")
	e.expireLease(c.Key)
	_, err := e.l.ExpireLeases(e.ctx, 10)
	require.NoError(t, err)
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-late", Confirmed: true})
	requireRefused(t, err, ledger.ErrFenced)
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-late", Confirmed: true})
	requireRefused(t, err, ledger.ErrFenced)
	require.Equal(t, 2, e.count(`SELECT count(*) FROM attempt_evidence WHERE delivery_key = $1 AND fenced AND outcome = 'success'`, c.Key.Bytes()))
}

// After a Begin whose answer was lost, the caller's own claims are those that stand under the
// tokens it minted: not another's claim of the same intent, not a claim whose lease ran out,
// not an intent it did not claim.
func TestOwnClaimsAreTheClaimsThatStandUnderTheCallersTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	token := func() identity.AttemptToken {
		tok, err := identity.NewAttemptToken()
		require.NoError(t, err)
		return tok
	}
	mine, theirs, expired := e.submit("mine"), e.submit("theirs"), e.submit("expired")
	reqs := []ledger.BeginRequest{
		{Key: mine, RequestHash: requestHash("mine"), Token: token(), Acknowledged: 7},
		{Key: expired, RequestHash: requestHash("expired"), Token: token()},
	}
	res, err := e.l.BeginMany(e.ctx, reqs, lease)
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)
	other, err := e.l.Begin(e.ctx, theirs, requestHash("theirs"), lease)
	require.NoError(t, err)
	e.expireLease(expired)
	asked := append(reqs, ledger.BeginRequest{Key: theirs, RequestHash: requestHash("theirs"), Token: token()})

	own, err := e.l.OwnClaims(e.ctx, asked)
	require.NoError(t, err)
	require.Len(t, own, 1)
	require.Equal(t, res[0].Claim, own[0], "the claim as Begin answered it")
	require.NotEqual(t, other.Token, own[0].Token)
}

// The spec's fenced recovery, with a real send in between: A is authorized and reports
// not-sent, the intent is retried and B is authorized; A's late success is fenced and kept,
// and B's authorization stands.
func TestALateCompleteFromAnEarlierAuthorizedAttemptIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.authorized("twice authorized")
	_, err := e.l.Complete(e.ctx, a, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	require.NoError(t, e.l.Retry(e.ctx, a.Key))
	b, err := e.l.Begin(e.ctx, a.Key, requestHash("twice authorized"), lease)
	require.NoError(t, err)
	auth, err := e.l.Authorize(e.ctx, b, inFlight, contract)
	require.NoError(t, err)
	require.True(t, auth.Authorized())

	_, err = e.l.Complete(e.ctx, a, ledger.Outcome{Result: ledger.Sent, ObjectID: "late", Confirmed: true})
	requireRefused(t, err, ledger.ErrFenced)
	in := e.intent(a.Key)
	require.Equal(t, ledger.Authorized, in.State, "B's authorization stands")
	require.Equal(t, b.Token, in.Token)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE attempt_token = $1 AND fenced`, a.Token.Bytes()))
}

// After a restore the epoch is bumped: an authorized worker of the old epoch that reports in
// (even a not-sent, which would reopen the intent) changes nothing; its report is evidence.
func TestACompletionFromAnOldEpochIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("before the restore")
	_, err := e.l.BumpEpoch(e.ctx, ledger.Actor{Name: "operator", Reason: "restore"})
	require.NoError(t, err)
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	requireRefused(t, err, ledger.ErrFenced)
	require.Equal(t, ledger.Authorized, e.state(c.Key), "only the lease's expiry moves it on, to indeterminate")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE attempt_token = $1 AND fenced`, c.Token.Bytes()))
}
