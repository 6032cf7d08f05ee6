package ledger_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestSubmitCreatesOnceAndReportsDuplicates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := envelope(t, account, "one"), envelope(t, account, "two")
	unknown := envelope(t, "acct-nobody", "three")

	res, err := e.l.Submit(e.ctx, []identity.Envelope{a, b, a, unknown})
	require.NoError(t, err)
	require.Equal(t, []ledger.SubmitOutcome{ledger.Created, ledger.Created, ledger.Duplicate, ledger.UnknownAccount},
		[]ledger.SubmitOutcome{res[0].Outcome, res[1].Outcome, res[2].Outcome, res[3].Outcome})
	require.Equal(t, a.DeliveryKey(), res[0].Key)

	again, err := e.l.Submit(e.ctx, []identity.Envelope{b, a})
	require.NoError(t, err)
	require.Equal(t, ledger.Duplicate, again[0].Outcome)
	require.Equal(t, ledger.Duplicate, again[1].Outcome)

	require.Equal(t, 2, e.count(`SELECT count(*) FROM intents`))
	require.Equal(t, 2, e.count(`SELECT count(*) FROM history WHERE seq = 1 AND to_state = 'pending' AND reason = 'submitted'`))
	require.Equal(t, 2, e.count(`SELECT count(*) FROM outbox WHERE dispatch`))
	require.Equal(t, ledger.Pending, e.state(a.DeliveryKey()))
}

func TestPublishedPathWritesOneAttemptAndAHistoryRowPerTransition(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("hello")
	done, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: true})
	require.NoError(t, err)
	require.Equal(t, ledger.Published, done.State)

	rec, err := e.l.Inspect(e.ctx, c.Key)
	require.NoError(t, err)
	require.Equal(t, ledger.Published, rec.Intent.State)
	require.Equal(t, "obj-1", rec.Intent.ObjectID)
	require.Len(t, rec.Attempts, 1)
	require.Equal(t, c.Token, rec.Attempts[0].Token)
	var path []string
	for _, h := range rec.Transitions {
		path = append(path, string(h.To)+"/"+string(h.Reason))
	}
	require.Equal(t, []string{"pending/submitted", "pending/claimed", "authorized/authorized", "published/published"}, path)
	require.Equal(t, len(rec.Transitions), e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1`, c.Key.Bytes()),
		"every history row has its outbox row")
	require.Len(t, rec.Evidence, 1)
	require.False(t, rec.Evidence[0].Fenced)
}

func TestSuccessWithoutReadBackIsIndeterminate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i, o := range []ledger.Outcome{
		{Result: ledger.Sent, ObjectID: "obj-1", Confirmed: false},
		{Result: ledger.Sent, Confirmed: true},
		{Result: ledger.Sent, Reason: ledger.ReasonPublishedUnread},
		{Result: ledger.Unknown},
	} {
		c := e.authorized(fmt.Sprintf("text %d", i))
		done, err := e.l.Complete(e.ctx, c, o)
		require.NoError(t, err)
		require.Equal(t, ledger.Indeterminate, done.State, "%+v", o)
	}
}

// An account that takes the platform's answer as the proof publishes a success naming its
// object without a read-back, under its own reason, so history shows nothing was read back.
func TestASuccessTheResponseConfirmsIsPublishedUnread(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("taken on the platform's word")
	done, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-9", Reason: ledger.ReasonPublishedUnread})
	require.NoError(t, err)
	require.Equal(t, ledger.Completion{State: ledger.Published, Reason: ledger.ReasonPublishedUnread}, done)
	rec, err := e.l.Inspect(e.ctx, c.Key)
	require.NoError(t, err)
	require.Equal(t, "obj-9", rec.Intent.ObjectID)
	last := rec.Transitions[len(rec.Transitions)-1]
	require.Equal(t, "published/published_unread", string(last.To)+"/"+string(last.Reason))
}

func TestProvenNotSentFailsAndReleasesTheText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("same words")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM text_claims`))
	done, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	require.Equal(t, ledger.Failed, done.State)
	require.Zero(t, e.count(`SELECT count(*) FROM text_claims`), "a proven not-sent gives the text back")

	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonSendUnknown})
	require.Error(t, err, "not-sent needs a not-sent reason")
}

func TestRetryWritesNoAttemptAndTheNextBeginWritesExactlyOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("again")
	_, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonPlatformRejected})
	require.NoError(t, err)
	require.Equal(t, 1, e.attempts(c.Key))

	require.NoError(t, e.l.Retry(e.ctx, c.Key))
	require.Equal(t, ledger.Pending, e.state(c.Key))
	require.Equal(t, 1, e.attempts(c.Key), "Retry writes no attempt row")

	next, err := e.l.Begin(e.ctx, c.Key, requestHash("again"), lease)
	require.NoError(t, err)
	require.Equal(t, 2, e.attempts(c.Key), "the next Begin writes exactly one")
	require.Equal(t, c.Key, next.Key)
	require.NotEqual(t, c.Token, next.Token)
	require.Greater(t, next.Generation, c.Generation)
}

func TestRetryOutsideFailedIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pending := e.submit("p")
	claimed := e.claim("c")
	authorized := e.authorized("a")
	published := e.authorized("pub")
	_, err := e.l.Complete(e.ctx, published, ledger.Outcome{Result: ledger.Sent, ObjectID: "o", Confirmed: true})
	require.NoError(t, err)
	unknown := e.authorized("u")
	_, err = e.l.Complete(e.ctx, unknown, ledger.Outcome{Result: ledger.Unknown})
	require.NoError(t, err)

	for name, key := range map[string]identity.DeliveryKey{
		"pending": pending, "claimed": claimed.Key, "authorized": authorized.Key,
		"published": published.Key, "indeterminate": unknown.Key,
	} {
		before := e.intent(key)
		requireRefused(t, e.l.Retry(e.ctx, key), ledger.ErrInvalidTransition)
		after := e.intent(key)
		require.Equal(t, before.State, after.State, name)
		require.Equal(t, before.Seq, after.Seq, "%s: a refused retry writes no history", name)
	}
	requireRefused(t, e.l.Retry(e.ctx, identity.DeliveryKey{}), ledger.ErrNotFound)
}

func TestAttemptCapExhaustionParksInsteadOfLooping(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("attempt_cap", 2)
	key := e.submit("capped")
	for i := 0; i < 2; i++ {
		c, err := e.l.Begin(e.ctx, key, requestHash("capped"), lease)
		require.NoError(t, err)
		a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		require.True(t, a.Authorized())
		// Neutral: a failure seen on the platform would make the next attempt the suspect
		// slot's, which is not counted.
		_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed, Signal: ledger.SignalNeutral})
		require.NoError(t, err)
		if i == 0 {
			require.NoError(t, e.l.Retry(e.ctx, key))
		}
	}
	requireRefused(t, e.l.Retry(e.ctx, key), ledger.ErrAttemptsExhausted)
	in := e.intent(key)
	require.Equal(t, ledger.Parked, in.State)
	require.Equal(t, ledger.ReasonAttemptsExhausted, in.Reason)
	require.Equal(t, 2, e.attempts(key))
}

func TestBeginParksWhenTheCapWasLoweredUnderAPendingIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("lowered")
	_, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	require.NoError(t, e.l.Retry(e.ctx, c.Key))
	e.setPolicy("attempt_cap", 1)
	_, err = e.l.Begin(e.ctx, c.Key, requestHash("lowered"), lease)
	requireRefused(t, err, ledger.ErrAttemptsExhausted)
	require.Equal(t, ledger.Parked, e.state(c.Key))
	require.Equal(t, 1, e.attempts(c.Key), "a parked intent gets no new attempt")
}

// A platform's answer may carry a NUL character, which PostgreSQL refuses in JSONB and TEXT.
// The outcome is recorded all the same: no answer can make an outcome unrecordable.
func TestAnOutcomeCarryingNULIsStillRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("nul in the answer")
	done, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Unknown, ObjectID: "obj\x00id",
		Detail: map[string]any{"response": "bad\x00gateway", "nested": map[string]any{"x": "\x00"}}})
	require.NoError(t, err)
	require.Equal(t, ledger.Indeterminate, done.State)
	rec, err := e.l.Inspect(e.ctx, c.Key)
	require.NoError(t, err)
	require.Contains(t, string(rec.Evidence[len(rec.Evidence)-1].Detail), "bad\ufffdgateway")
}

// An outcome Complete cannot record is a permanent error, which a caller must not retry as is;
// a lost connection or exhausted restarts are not.
func TestMalformedOutcomesArePermanentErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.authorized("malformed outcome")
	_, err := e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonSendUnknown})
	require.ErrorIs(t, err, ledger.ErrMalformedOutcome)
	require.True(t, ledger.Permanent(err))
	require.True(t, ledger.Permanent(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "22P05"})))
	require.True(t, ledger.Permanent(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "54000"})))
	require.False(t, ledger.Permanent(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "40001"})))
	require.False(t, ledger.Permanent(fmt.Errorf("complete: %w", ledger.ErrRetriesExhausted)))
	require.False(t, ledger.Permanent(context.DeadlineExceeded))
	require.Equal(t, ledger.Authorized, e.state(c.Key), "nothing was recorded")
}
