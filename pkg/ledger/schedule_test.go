package ledger_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// submitScheduled stores a post with the times given (zero: none) and returns its key.
func (e *env) submitScheduled(text string, notBefore, expiresAt time.Time) identity.DeliveryKey {
	e.t.Helper()
	env, err := envelope(e.t, account, text).WithSchedule(notBefore, expiresAt)
	require.NoError(e.t, err)
	res, err := e.l.Submit(e.ctx, []identity.Envelope{env})
	require.NoError(e.t, err)
	require.Equal(e.t, ledger.Created, res[0].Outcome)
	return res[0].Key
}

// Before not_before, Begin opens no attempt and changes nothing: no attempt row, no history,
// and the answer says until when to wait. Once due, it claims as always.
func TestBeginOpensNoAttemptBeforeNotBefore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	notBefore := e.dbNow().Add(time.Hour).Truncate(time.Microsecond)
	key := e.submitScheduled("not yet", notBefore, time.Time{})
	before := e.intent(key)
	require.NotNil(t, before.NotBefore)
	require.True(t, before.NotBefore.Equal(notBefore))

	res, err := e.l.BeginMany(e.ctx, []ledger.BeginRequest{{Key: key, RequestHash: requestHash("not yet")}}, lease)
	require.NoError(t, err)
	requireRefused(t, res[0].Err, ledger.ErrNotDue)
	require.True(t, res[0].NotBefore.Equal(notBefore), "the answer names not_before: %s", res[0].NotBefore)
	require.Equal(t, 0, e.attempts(key))
	after := e.intent(key)
	require.Equal(t, ledger.Pending, after.State)
	require.Equal(t, before.Seq, after.Seq, "nothing written")

	// Due: the same intent is claimed.
	e.exec(`UPDATE intents SET not_before = now() - INTERVAL '1 second' WHERE delivery_key = $1`, key.Bytes())
	_, err = e.l.Begin(e.ctx, key, requestHash("not yet"), lease)
	require.NoError(t, err)
	require.Equal(t, 1, e.attempts(key))
}

// Authorize is the last checkpoint for not_before too: a claim whose not_before is still ahead
// on the authorizing clock ends (not_due), the intent waits pending, and no attempt is spent.
func TestAuthorizeRefusesAClaimBeforeNotBefore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.dbNow()
	key := e.submitScheduled("early claim", now.Add(-time.Second), time.Time{})
	c, err := e.l.Begin(e.ctx, key, requestHash("early claim"), lease)
	require.NoError(t, err)
	early := now.Add(-time.Minute) // a clock at which not_before is still ahead
	ledger.SetClock(e.l, func() *time.Time { return &early })
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Pending, a.State)
	require.Equal(t, ledger.ReasonNotDue, a.Reason)
	in := e.intent(key)
	require.Equal(t, 0, in.AttemptsAuthorized, "no attempt spent")
	require.Nil(t, in.LeaseExpiresAt, "the claim ended")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE attempt_token = $1 AND outcome = 'abandoned' AND reason = 'not_due'`, c.Token.Bytes()))
}

// At or after expires_at, Begin parks the intent expired instead of claiming it: no attempt.
func TestBeginParksAnExpiredIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.submitScheduled("stale news", time.Time{}, e.dbNow().Add(-time.Second))
	_, err := e.l.Begin(e.ctx, key, requestHash("stale news"), lease)
	requireRefused(t, err, ledger.ErrExpired)
	in := e.intent(key)
	require.Equal(t, ledger.Parked, in.State)
	require.Equal(t, ledger.ReasonExpired, in.Reason)
	require.Equal(t, 0, e.attempts(key))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND reason = 'expired' AND to_state = 'parked'`, key.Bytes()))
}

// Authorize parks a claim whose expires_at passed between Begin and the checkpoint.
func TestAuthorizeParksAClaimThatExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.dbNow()
	key := e.submitScheduled("expires in flight", time.Time{}, now.Add(time.Hour))
	c, err := e.l.Begin(e.ctx, key, requestHash("expires in flight"), 3*time.Hour)
	require.NoError(t, err)
	late := now.Add(2 * time.Hour)
	ledger.SetClock(e.l, func() *time.Time { return &late })
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Parked, a.State)
	require.Equal(t, ledger.ReasonExpired, a.Reason)
	require.Equal(t, 0, e.intent(key).AttemptsAuthorized)
}

// Nothing brings an expired intent to a send: not a retry of a failed attempt, not the end of
// an account's hold, not a restore that resumes it pending. Each path goes through Begin, which
// parks it.
func TestAnExpiredIntentIsNeverSentAfterARetryAHoldOrARestore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.dbNow()

	// A retry: failed while still fresh, retried after expires_at.
	retried := e.submitScheduled("retried late", time.Time{}, now.Add(time.Hour))
	c, err := e.l.Begin(e.ctx, retried, requestHash("retried late"), lease)
	require.NoError(t, err)
	_, err = e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	e.exec(`UPDATE intents SET expires_at = now() - INTERVAL '1 second' WHERE delivery_key = $1`, retried.Bytes())
	require.NoError(t, e.l.Retry(e.ctx, retried))
	_, err = e.l.Begin(e.ctx, retried, requestHash("retried late"), lease)
	requireRefused(t, err, ledger.ErrExpired)
	require.Equal(t, ledger.ReasonExpired, e.intent(retried).Reason)
	require.Equal(t, 1, e.attempts(retried), "only the attempt made while fresh")

	// A hold: the account held while the intent expired; expiry parks it though it still holds.
	held := e.submitScheduled("held late", time.Time{}, now.Add(-time.Second))
	e.holdHealth("platform_unavailable", time.Hour)
	_, err = e.l.Begin(e.ctx, held, requestHash("held late"), lease)
	requireRefused(t, err, ledger.ErrExpired)
	require.Equal(t, ledger.ReasonExpired, e.intent(held).Reason)
	e.exec(`DELETE FROM account_health`)

	// A restore: resumed pending after expires_at.
	restored := e.submitScheduled("restored late", time.Time{}, now.Add(-time.Second))
	e.exec(`UPDATE intents SET reason = 'restore_resumed' WHERE delivery_key = $1`, restored.Bytes())
	_, err = e.l.Begin(e.ctx, restored, requestHash("restored late"), lease)
	requireRefused(t, err, ledger.ErrExpired)
	require.Equal(t, 0, e.attempts(restored))
}

// A re-published intent with other times is the same intent: the first stored times stand.
func TestTheFirstStoredTimesStand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.dbNow().Add(time.Hour).Truncate(time.Microsecond)
	key := e.submitScheduled("times stand", first, first.Add(time.Hour))
	again, err := envelope(t, account, "times stand").WithSchedule(first.Add(-time.Hour), first.Add(48*time.Hour))
	require.NoError(t, err)
	require.Equal(t, key, again.DeliveryKey(), "the times are outside the key")
	res, err := e.l.Submit(e.ctx, []identity.Envelope{again})
	require.NoError(t, err)
	require.Equal(t, ledger.Duplicate, res[0].Outcome)
	in := e.intent(key)
	require.True(t, in.NotBefore.Equal(first))
	require.True(t, in.ExpiresAt.Equal(first.Add(time.Hour)))
}

// A pool of dispatchers asking for a not-yet-due intent opens nothing and writes nothing,
// however many ask at once.
func TestConcurrentBeginsOnANotDueIntentWriteNothing(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		key := e.submitScheduled("pool waits", e.dbNow().Add(time.Hour), time.Time{})
		seq := e.intent(key).Seq
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				_, err := e.l.Begin(e.ctx, key, requestHash("pool waits"), lease)
				requireRefused(t, err, ledger.ErrNotDue)
			})
		}
		wg.Wait()
		require.Equal(t, 0, e.attempts(key))
		require.Equal(t, seq, e.intent(key).Seq)
	})
}

// The sweeper's stranded scan leaves an intent waiting for its not_before alone, however long
// it has rested, and brings it back as soon as it is due, however recently it moved: a
// dispatcher that met it long before its time let its work item go.
func TestStrandedPendingWaitsForNotBeforeThenCountsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	key := e.submitScheduled("far ahead", e.dbNow().Add(time.Hour), time.Time{})
	e.exec(`UPDATE intents SET updated_at = now() - INTERVAL '1 day' WHERE delivery_key = $1`, key.Bytes())
	stranded, err := e.l.StrandedPending(e.ctx, time.Hour, 10)
	require.NoError(t, err)
	require.Empty(t, stranded, "not due: waiting, not stranded")

	e.exec(`UPDATE intents SET not_before = now() - INTERVAL '1 second', updated_at = now() WHERE delivery_key = $1`, key.Bytes())
	stranded, err = e.l.StrandedPending(e.ctx, time.Hour, 10)
	require.NoError(t, err)
	require.Len(t, stranded, 1, "due: its work is published again at once")
	require.Equal(t, key, stranded[0].Key)
}

// A restore that recreates a pending intent the ledger lacks brings its times back from its
// envelope: one that has expired meanwhile is parked expired at its next Begin, never sent.
func TestARestoredIntentKeepsItsTimes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env, err := envelope(t, account, "restored, expired").WithSchedule(time.Time{}, e.dbNow().Add(-time.Second))
	require.NoError(t, err)
	tr, _ := stream(t, ledger.Pending)
	res := e.restore(env.DeliveryKey(), account, tr, &env, false)
	require.Equal(t, ledger.RestoreCreated, res.Verdict)
	require.Equal(t, ledger.Pending, res.To)
	in := e.intent(env.DeliveryKey())
	require.NotNil(t, in.ExpiresAt)
	require.True(t, in.ExpiresAt.Equal(env.ExpiresAt))
	_, err = e.l.Begin(e.ctx, env.DeliveryKey(), requestHash("restored, expired"), lease)
	requireRefused(t, err, ledger.ErrExpired)
	require.Equal(t, 0, e.attempts(env.DeliveryKey()))
}
