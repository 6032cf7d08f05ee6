package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// Status answers from the ledger, for an intent stored before the asking process existed, and
// follows its transitions.
func TestStatusAnswersForAnIntentStoredBeforeTheCallerStarted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	key := e.Submit("acct-1", "stored before")[0]
	e.serveStatus()
	ctx := timeout(t, 30*time.Second)

	c, err := client.New(connect(t, e.NATSURL), client.Config{})
	require.NoError(t, err)
	o, err := c.Status(ctx, "acct-1", key)
	require.NoError(t, err)
	require.Equal(t, client.Outcome{Key: key, Account: "acct-1", State: "pending", Reason: "submitted", Retry: "progress", Seq: 1, UpdatedAt: o.UpdatedAt}, o)
	require.False(t, o.Settled())
	require.False(t, o.UpdatedAt.IsZero())

	require.NoError(t, e.Ledger.Park(ctx, key, ledger.Actor{Name: "test", Reason: "a person looks at it"}))
	o, err = c.Status(ctx, "acct-1", key)
	require.NoError(t, err)
	require.Equal(t, atmosttype.Parked, o.State)
	require.Equal(t, atmosttype.ReasonOperatorParked, o.Reason)
	require.Equal(t, atmosttype.Human, o.Retry)
	require.Equal(t, int64(2), o.Seq)
	require.True(t, o.Settled())
}

// An intent is found under its own account only: asked for under another, or never stored,
// it is not found.
func TestStatusFindsAnIntentUnderItsOwnAccountOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	key := e.Submit("acct-1", "mine")[0]
	e.serveStatus()
	ctx := timeout(t, 30*time.Second)
	_, err := e.c.Status(ctx, "acct-2", key)
	require.ErrorIs(t, err, client.ErrNotFound)
	env, err := post("acct-1", "never published").Envelope()
	require.NoError(t, err)
	_, err = e.c.Status(ctx, "acct-1", env.DeliveryKey())
	require.ErrorIs(t, err, client.ErrNotFound)
	_, err = e.c.Status(ctx, "acct-1", key)
	require.NoError(t, err)
}

func TestStatusWithoutTheServiceSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	key := e.Submit("acct-1", "nobody answers")[0]
	ctx := timeout(t, 30*time.Second)
	_, err := e.c.Status(ctx, "acct-1", key)
	require.ErrorIs(t, err, client.ErrNoStatusService)
	_, err = e.c.Await(ctx, "acct-1", key)
	require.ErrorIs(t, err, client.ErrNoStatusService)
}

// Await learns each transition from the intent's event, not from its poll: with a poll of an
// hour it still returns as soon as the intent is parked. It waits for an intent not ingested
// yet too.
func TestAwaitReturnsOnTheEventOfTheTransition(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{PollInterval: time.Hour})
	e.serveStatus()
	ctx := timeout(t, 60*time.Second)
	r, err := e.c.Publish(ctx, post("acct-1", "await me"))
	require.NoError(t, err)

	seen := make(chan client.Outcome, 16)
	type result struct {
		o   client.Outcome
		err error
	}
	done := make(chan result, 1)
	go func() {
		o, err := e.c.Await(ctx, r.Account, r.Key, client.Until(func(o client.Outcome) bool {
			seen <- o
			return o.State == atmosttype.Parked
		}))
		done <- result{o, err}
	}()
	time.Sleep(100 * time.Millisecond) // Await asks before ingest stored it, and waits
	require.Equal(t, 1, e.ingest().Created)
	select {
	case o := <-seen:
		require.Equal(t, atmosttype.Pending, o.State)
	case <-time.After(20 * time.Second):
		t.Fatal("Await never saw the intent ingest stored")
	}
	require.NoError(t, e.Ledger.Park(ctx, r.Key, ledger.Actor{Name: "test", Reason: "parked while awaited"}))
	_, err = e.Relay.Drain(ctx)
	require.NoError(t, err)
	select {
	case res := <-done:
		require.NoError(t, res.err)
		require.Equal(t, atmosttype.Parked, res.o.State)
		require.Equal(t, atmosttype.ReasonOperatorParked, res.o.Reason)
		require.Equal(t, r.Key, res.o.Key)
	case <-time.After(20 * time.Second):
		t.Fatal("Await did not return on the parked event")
	}
}

// Await returns a settled intent at once, and when its context ends, the last outcome it
// read with the context's error.
func TestAwaitEndsSettledOrWithItsContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	e.serveStatus()
	keys := e.Submit("acct-1", "settled", "still pending")
	ctx := timeout(t, 30*time.Second)
	require.NoError(t, e.Ledger.Park(ctx, keys[0], ledger.Actor{Name: "test", Reason: "settled"}))
	o, err := e.c.Await(ctx, "acct-1", keys[0])
	require.NoError(t, err)
	require.Equal(t, atmosttype.Parked, o.State)

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	o, err = e.c.Await(short, "acct-1", keys[1])
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, atmosttype.Pending, o.State)
}

// The client's settled states and the outcome's fields are the ledger's names.
func TestOutcomesNameTheLedgersStates(t *testing.T) {
	for _, s := range atmosttype.States() {
		o := client.Outcome{State: s}
		want := s == ledger.Published || s == ledger.Failed || s == ledger.Parked
		require.Equal(t, want, o.Settled(), s)
	}
	require.Equal(t, "atmost.status.acct-1", client.StatusSubject("acct-1"))
	require.Equal(t, "atmost.status."+identity.AccountToken("a.b"), client.StatusSubject("a.b"))
}

// An intent that ingest refused (its account is not configured) is never stored; asked for
// with the sequence of the message that carried it, its outcome is that refusal, so Await
// returns instead of waiting for ever. The refusal is told only to who names both the
// account's subject and the key the message carried.
func TestAwaitLearnsThatIngestRefusedTheMessage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{PollInterval: 200 * time.Millisecond})
	e.serveStatus()
	ctx := timeout(t, 30*time.Second)
	r, err := e.c.Publish(ctx, post("nobody", "an account nobody configured"))
	require.NoError(t, err)
	require.Equal(t, 1, e.ingest().Rejected)

	_, err = e.c.Status(ctx, r.Account, r.Key)
	require.ErrorIs(t, err, client.ErrNotFound, "without the message, nothing is known")
	o, err := e.c.Await(ctx, r.Account, r.Key, client.Seq(r.Seq))
	require.NoError(t, err)
	require.True(t, o.Settled())
	require.Empty(t, o.State)
	require.Equal(t, identity.ReasonUnknownAccount, o.Rejected.Reason)
	require.Contains(t, o.Rejected.Detail, "nobody")
	require.Contains(t, o.Rejected.Remedy, "`atmost rejects replay --account nobody`", "an operator can fix it: the answer says how")
	require.ErrorContains(t, o.Rejected, "ingest refused the message: unknown_account: ")
	require.ErrorContains(t, o.Rejected, "; an operator can fix this: ", "the error carries the remedy")

	// On the wire, a refusal carries no intent's fields: no empty state, no seq 0, no
	// updated_at of the year 1 for a producer in another language to take for values.
	m, err := e.nc.RequestWithContext(ctx, client.StatusSubject(r.Account),
		[]byte(fmt.Sprintf(`{"delivery_key":%q,"seq":%d}`, r.Key, r.Seq)))
	require.NoError(t, err)
	var wire map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(m.Data, &wire))
	require.ElementsMatch(t, []string{"delivery_key", "account", "rejected"}, slices.Collect(maps.Keys(wire)), string(m.Data))

	other, err := post("acct-1", "another key").Envelope()
	require.NoError(t, err)
	_, err = e.c.Status(ctx, "acct-1", r.Key, client.Seq(r.Seq))
	require.ErrorIs(t, err, client.ErrNotFound, "another account's message")
	_, err = e.c.Status(ctx, r.Account, other.DeliveryKey(), client.Seq(r.Seq))
	require.ErrorIs(t, err, client.ErrNotFound, "another key")
}

// Only a refusal an operator can fix has a remedy, and it can be pasted into a shell whatever
// the account's bytes.
func TestARemedyOnlyWhereAnOperatorCanFixIt(t *testing.T) {
	t.Parallel()
	for _, r := range identity.AllReasons() {
		require.Equal(t, r == identity.ReasonUnknownAccount, client.Remedy(r, "acct-1") != "", r)
	}
	require.Contains(t, client.Remedy(identity.ReasonUnknownAccount, "team a's"), `--account 'team a'\''s'`)
	require.Contains(t, client.Remedy(identity.ReasonUnknownAccount, "acct-42"), "--account acct-42`")
	require.Equal(t, "ingest refused the message: subject_mismatch: d", (&client.Rejection{Reason: identity.ReasonSubjectMismatch, Detail: "d"}).Error())
}
