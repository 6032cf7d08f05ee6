package relay_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

type env struct {
	ctx context.Context
	db  *dbtest.DB
	l   *ledger.Ledger
	js  jetstream.JetStream
}

func newEnv(t *testing.T) *env { return newEnvTB(t) }

func newEnvTB(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	db := dbtest.New(t)
	_, err := db.Pool.Exec(ctx, `INSERT INTO accounts (account_id, platform) VALUES ('acct.1', 'sim')`)
	require.NoError(t, err)
	l, err := ledger.New(db.AppPool(t), ledger.Config{Actor: "test"})
	require.NoError(t, err)
	js := natstest.New(t).Streams(t)
	return &env{ctx: ctx, db: db, l: l, js: js}
}

// lifecycle runs n intents through submit, begin, authorize and complete: 4 transitions each,
// one of them (the creation) into pending.
func (e *env) lifecycle(t *testing.T, n int) {
	t.Helper()
	texts := make([]string, n)
	for i := range texts {
		texts[i] = fmt.Sprintf("relay %d", i)
	}
	res, err := e.l.Submit(e.ctx, envelopes(t, texts...))
	require.NoError(t, err)
	for _, r := range res {
		c, err := e.l.Begin(e.ctx, r.Key, sha256.Sum256([]byte("x")), time.Minute)
		require.NoError(t, err)
		_, err = e.l.Authorize(e.ctx, c, time.Minute, "")
		require.NoError(t, err)
		_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "o", Confirmed: true})
		require.NoError(t, err)
	}
}

// envelopes are posts of acct.1, one per text.
func envelopes(t testing.TB, texts ...string) []identity.Envelope {
	t.Helper()
	envs := make([]identity.Envelope, len(texts))
	for i, text := range texts {
		req, err := json.Marshal(map[string]string{"text": text})
		require.NoError(t, err)
		envs[i], err = identity.NewEnvelope("acct.1", "post", "", req, "", nil)
		require.NoError(t, err)
	}
	return envs
}

// streamIDs reads every message of stream and counts each Nats-Msg-Id.
func (e *env) streamIDs(t *testing.T, stream string) map[string]int {
	t.Helper()
	s, err := e.js.Stream(e.ctx, stream)
	require.NoError(t, err)
	info, err := s.Info(e.ctx)
	require.NoError(t, err)
	ids := map[string]int{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(e.ctx, seq)
		require.NoError(t, err)
		ids[m.Header.Get(jetstream.MsgIDHeader)]++
		if stream == events.EventsStream {
			_, err := events.Unmarshal(m.Data)
			require.NoError(t, err, "every payload is a valid event")
		}
	}
	return ids
}

func TestEveryHistoryRowReachesTheStreamOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.lifecycle(t, 10)
	r := relay.New(e.l, e.js, relay.Config{Batch: 7})
	n, err := r.Drain(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 40, n)

	var history int
	require.NoError(t, e.db.Pool.QueryRow(e.ctx, `SELECT count(*) FROM history`).Scan(&history))
	ids := e.streamIDs(t, events.EventsStream)
	require.Len(t, ids, history)
	for id, count := range ids {
		require.Equal(t, 1, count, id)
	}
	// A work item per transition into pending, but for those published in a round with a
	// later transition of their intent (TestATransitionIntoPendingPublishedWithALaterOneGetsNoWorkItem):
	// the first round's 7 rows are submissions of 7 intents, the second's 3 more submissions
	// and the first intent's later transitions.
	work := e.streamIDs(t, events.DispatchStream)
	require.GreaterOrEqual(t, len(work), 7)
	require.LessOrEqual(t, len(work), 10)
	for id, count := range work {
		require.Equal(t, 1, count, id)
		require.True(t, strings.HasSuffix(id, ":1"), "%s names a submission", id)
	}
	var left int
	require.NoError(t, e.db.Pool.QueryRow(e.ctx, `SELECT count(*) FROM outbox`).Scan(&left))
	require.Zero(t, left)

	again, err := r.Drain(e.ctx)
	require.NoError(t, err)
	require.Zero(t, again)
}

// A work item asks for a pending intent to be taken. A transition into pending published
// with a later one of its intent (a dispatcher's claim: Begin names the submission its
// ingester has not removed yet along with the claim) has its event on the stream and no work
// item, since the intent was taken; an intent still pending gets its work item.
func TestATransitionIntoPendingPublishedWithALaterOneGetsNoWorkItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res, err := e.l.Submit(e.ctx, envelopes(t, "taken", "waiting"))
	require.NoError(t, err)
	taken, waiting := res[0].Key, res[1].Key
	_, err = e.l.Begin(e.ctx, taken, sha256.Sum256([]byte("x")), time.Minute)
	require.NoError(t, err)

	n, err := relay.New(e.l, e.js, relay.Config{}).Drain(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, map[string]int{
		string(events.NewID(taken, 1)): 1, string(events.NewID(taken, 2)): 1, string(events.NewID(waiting, 1)): 1,
	}, e.streamIDs(t, events.EventsStream), "every transition's event")
	require.Equal(t, map[string]int{"work:" + string(events.NewID(waiting, 1)): 1}, e.streamIDs(t, events.DispatchStream),
		"a work item for the intent still pending only")
}

// forgetful fails to clear the outbox once, as a relay that crashes between the publish and the
// delete would.
type forgetful struct {
	*ledger.Ledger
	fails int
}

func (f *forgetful) Published(ctx context.Context, done []ledger.Unpublished) ([]ledger.Unpublished, error) {
	if f.fails > 0 {
		f.fails--
		return nil, errors.New("crashed before the delete")
	}
	return f.Ledger.Published(ctx, done)
}

func TestARelayCrashBetweenPublishAndDeleteDuplicatesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.lifecycle(t, 5)
	// And one intent still pending, whose work item goes out with each round.
	pending := envelopes(t, "still pending")[0]
	_, err := e.l.Submit(e.ctx, []identity.Envelope{pending})
	require.NoError(t, err)
	_, err = relay.New(&forgetful{Ledger: e.l, fails: 1}, e.js, relay.Config{}).Drain(e.ctx)
	require.Error(t, err)
	n, err := relay.New(e.l, e.js, relay.Config{}).Drain(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 21, n, "everything was published again")
	ids := e.streamIDs(t, events.EventsStream)
	require.Len(t, ids, 21)
	for id, count := range ids {
		require.Equal(t, 1, count, "%s is in the stream once", id)
	}
	work := e.streamIDs(t, events.DispatchStream)
	require.Len(t, work, 1, "the pending intent's work item, once; the others were taken")
	require.Equal(t, map[string]int{"work:" + string(events.NewID(pending.DeliveryKey(), 1)): 1}, work)
}

// Published names only the rows its own delete removed: of a batch half of which another
// relay already cleared, it returns the other half.
func TestPublishedReturnsOnlyTheRowsItRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.lifecycle(t, 2)
	rows, err := e.l.Unpublished(e.ctx, 100, 0)
	require.NoError(t, err)
	require.Len(t, rows, 8)
	first, err := e.l.Published(e.ctx, rows[:3])
	require.NoError(t, err)
	require.Equal(t, rows[:3], first)
	rest, err := e.l.Published(e.ctx, rows)
	require.NoError(t, err)
	require.Equal(t, rows[3:], rest)
	again, err := e.l.Published(e.ctx, rows)
	require.NoError(t, err)
	require.Empty(t, again)
}

// overtaken lets the relay's loop drain the outbox once between a writer's publish and its
// delete, as the ingest role's fast path and its relay loop can in one process.
type overtaken struct {
	*ledger.Ledger
	relay *relay.Relay
	once  bool
}

func (o *overtaken) Published(ctx context.Context, done []ledger.Unpublished) ([]ledger.Unpublished, error) {
	if !o.once {
		o.once = true
		if _, err := o.relay.Drain(ctx); err != nil {
			return nil, err
		}
	}
	return o.Ledger.Published(ctx, done)
}

// transitionsCounted sums the relay's atmost_transitions_total over its labels.
func transitionsCounted(t *testing.T, r *relay.Relay) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	for _, c := range r.Collectors() {
		require.NoError(t, reg.Register(c))
	}
	families, err := reg.Gather()
	require.NoError(t, err)
	sum := 0.0
	for _, f := range families {
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// A transition that two rounds publish at once is counted once, by the round whose delete took
// it from the outbox, in atmost_transitions_total as in atmost_relay_events_published_total.
func TestATransitionPublishedByTwoRoundsIsCountedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.lifecycle(t, 3)
	var keys []identity.DeliveryKey
	rows, err := e.l.Unpublished(e.ctx, 100, 0)
	require.NoError(t, err)
	for _, u := range rows {
		keys = append(keys, u.Key)
	}
	o := &overtaken{Ledger: e.l}
	r := relay.New(o, e.js, relay.Config{})
	o.relay = r
	require.NoError(t, r.PublishFor(e.ctx, keys))
	require.True(t, o.once)
	require.EqualValues(t, 12, r.Published())
	require.EqualValues(t, 12, transitionsCounted(t, r))
}

func TestEventsCarryTheTransition(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.lifecycle(t, 1)
	rows, err := e.l.Unpublished(e.ctx, 10, 0)
	require.NoError(t, err)
	require.Len(t, rows, 4)
	authorized := relay.Event(rows[2])
	require.Equal(t, ledger.Pending, authorized.From)
	require.Equal(t, ledger.Authorized, authorized.To)
	require.NotNil(t, authorized.Attempt)
	require.Positive(t, authorized.Generation)
	require.Equal(t, "atmost.event.authorized.~"+"YWNjdC4x", authorized.Subject())
	require.NoError(t, authorized.Validate())
}

// With RemoveLater, what a writer's publication got acknowledged leaves the outbox with the
// writer's next write (at READ COMMITTED; ledger.Ledger.ForgetLater), and is counted then, once;
// the loop's rounds still remove theirs at once.
func TestARelayThatRemovesLaterCountsWhatTheNextWriteRemoves(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l, err := ledger.New(e.db.AppPool(t), ledger.Config{Actor: "test", Isolation: pgx.ReadCommitted})
	require.NoError(t, err)
	e.l = l
	e.lifecycle(t, 1)
	rows, err := l.Unpublished(e.ctx, 10, 0)
	require.NoError(t, err)
	r := relay.New(l, e.js, relay.Config{RemoveLater: true})
	require.NoError(t, r.PublishFor(e.ctx, []identity.DeliveryKey{rows[0].Key}))
	require.Len(t, e.streamIDs(t, events.EventsStream), 4, "published at once")
	outbox := func() (n int) {
		require.NoError(t, e.db.Pool.QueryRow(e.ctx, `SELECT count(*) FROM outbox`).Scan(&n))
		return n
	}

	_, err = l.Submit(e.ctx, envelopes(t, "the next write"))
	require.NoError(t, err)
	// The next write took them, or (on a slow machine) the flush within ledger.ForgetDelay did.
	require.Eventually(t, func() bool { return outbox() == 1 && r.Published() == 4 }, 10*time.Second, 10*time.Millisecond,
		"the first intent's rows are gone and counted, the next one's waits")
	require.EqualValues(t, 4, transitionsCounted(t, r))
	n, err := r.Drain(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, outbox())
	require.EqualValues(t, 5, r.Published())
}

// The loop takes only the rows no writer is publishing any more: a row younger than Settle is
// its writer's (which publishes it right after its commit), an older one was left behind and
// is the loop's. Drain, for callers that want everything now, takes both.
func TestTheSlowPathLeavesAWritersRowsToItUntilTheySettle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.lifecycle(t, 2)
	r := relay.New(e.l, e.js, relay.Config{Settle: time.Hour})
	n, err := r.DrainSettled(e.ctx)
	require.NoError(t, err)
	require.Zero(t, n, "rows committed moments ago are their writer's")
	var left int
	require.NoError(t, e.db.Pool.QueryRow(e.ctx, `SELECT count(*) FROM outbox`).Scan(&left))
	require.Equal(t, 8, left)

	// Three of them were left behind an hour and more ago.
	_, err = e.db.Pool.Exec(e.ctx, `UPDATE outbox SET created_at = created_at - INTERVAL '61 minutes'
		WHERE (delivery_key, seq) IN (SELECT delivery_key, seq FROM outbox ORDER BY delivery_key, seq LIMIT 3)`)
	require.NoError(t, err)
	n, err = r.DrainSettled(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "the rows older than Settle are the slow path's")
	require.Len(t, e.streamIDs(t, events.EventsStream), 3)

	n, err = r.Drain(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 5, n, "Drain takes every row")

	// A negative Settle is none: the loop takes every row at once.
	e = newEnv(t)
	e.lifecycle(t, 1)
	n, err = relay.New(e.l, e.js, relay.Config{Settle: -1}).DrainSettled(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 4, n)
}

// The loop (Run) is the slow path: twenty rounds leave rows younger than Settle where they are.
func TestTheLoopTakesOnlySettledRows(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.lifecycle(t, 1)
	r := relay.New(e.l, e.js, relay.Config{Settle: time.Hour, Interval: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	time.Sleep(200 * time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	var left int
	require.NoError(t, e.db.Pool.QueryRow(e.ctx, `SELECT count(*) FROM outbox`).Scan(&left))
	require.Equal(t, 4, left, "the writer's rows are the writer's")
	require.Zero(t, r.Published())
}

// workItems reads every work item of ATMOST_DISPATCH, by intent.
func (e *env) workItems(t *testing.T) map[identity.DeliveryKey]events.WorkItem {
	t.Helper()
	s, err := e.js.Stream(e.ctx, events.DispatchStream)
	require.NoError(t, err)
	info, err := s.Info(e.ctx)
	require.NoError(t, err)
	out := map[identity.DeliveryKey]events.WorkItem{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(e.ctx, seq)
		require.NoError(t, err)
		w, err := events.UnmarshalWorkItem(m.Data)
		require.NoError(t, err)
		_, twice := out[w.DeliveryKey]
		require.False(t, twice, "one work item for %s", w.DeliveryKey)
		out[w.DeliveryKey] = w
	}
	return out
}

// A writer's publication (every row the outbox holds of its intents) sends an intent's work
// item only once JetStream acknowledged the intent's events, and says so (Follows), so that
// the dispatcher taking it publishes none of them again: an intent whose event JetStream
// refused gets no work item, and its row stays for the slow path. The slow path's round, which
// may end inside an intent's rows, sends its work items with the events, promising nothing.
func TestAWritersWorkItemFollowsTheEventsOfItsIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res, err := e.l.Submit(e.ctx, envelopes(t, "stored", "refused"))
	require.NoError(t, err)
	keys := []identity.DeliveryKey{res[0].Key, res[1].Key}
	if keys[1].String() < keys[0].String() {
		keys[0], keys[1] = keys[1], keys[0] // published in key order: the first is stored
	}
	stored, refused := keys[0], keys[1]
	limit := func(msgs int64) {
		s, err := e.js.Stream(e.ctx, events.EventsStream)
		require.NoError(t, err)
		info, err := s.Info(e.ctx)
		require.NoError(t, err)
		cfg := info.Config
		cfg.MaxMsgs, cfg.Discard = msgs, jetstream.DiscardNew
		_, err = e.js.UpdateStream(e.ctx, cfg)
		require.NoError(t, err)
	}
	limit(1) // ATMOST_EVENTS takes one event and refuses the next
	r := relay.New(e.l, e.js, relay.Config{})
	require.Error(t, r.PublishFor(e.ctx, keys), "one event was refused")
	require.Equal(t, map[identity.DeliveryKey]events.WorkItem{
		stored: {V: events.Version, DeliveryKey: stored, Account: "acct.1", Event: events.NewID(stored, 1), Follows: true},
	}, e.workItems(t), "a work item for the intent whose event is in the stream only, saying it follows it")
	left, err := e.l.Unpublished(e.ctx, 10, 0)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, refused, left[0].Key, "the refused intent's row stays in the outbox")

	limit(-1)
	n, err := r.Drain(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	work := e.workItems(t)
	require.Len(t, work, 2)
	require.False(t, work[refused].Follows, "the slow path's work item promises nothing")
	require.Equal(t, int64(0), work[refused].Acknowledged())
	require.Equal(t, int64(1), work[stored].Acknowledged())
}

// An intent twice in one ingest batch: its writer gathers what Submit named of both copies,
// submitted together (the second names nothing) or one by one, as ingest submits its
// messages after the database refused their batch (each finds the submission in the outbox,
// and Written keeps it once). The publication holds the transition once: it is sent once, its
// work item once, and the publication is acknowledged whole (a transition held twice waited
// for a work item's answer its copy never got, and the publication failed).
func TestATransitionTwiceInAPublicationIsSentOnce(t *testing.T) {
	t.Parallel()
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.Serializable} {
		for _, together := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/together=%t", iso, together), func(t *testing.T) {
				t.Parallel()
				e := newEnv(t)
				l, err := ledger.New(e.db.AppPool(t), ledger.Config{Actor: "test", Isolation: iso})
				require.NoError(t, err)
				twice := envelopes(t, "twice")
				var res []ledger.SubmitResult
				if together {
					res, err = l.Submit(e.ctx, append(twice, twice...))
					require.NoError(t, err)
				} else {
					for range 2 {
						one, err := l.Submit(e.ctx, twice)
						require.NoError(t, err)
						res = append(res, one...)
					}
				}
				require.Len(t, res, 2)
				require.Equal(t, res[0].Key, res[1].Key)
				var w ledger.Written
				for _, r := range res {
					w.Add(r.Key, r.Outbox)
				}
				r := relay.New(l, e.js, relay.Config{})
				require.NoError(t, r.PublishWritten(e.ctx, w))
				require.Len(t, e.workItems(t), 1)
				left, err := l.Unpublished(e.ctx, 10, 0)
				require.NoError(t, err)
				require.Empty(t, left)
			})
		}
	}
}

// refusingWork is JetStream whose client refuses to send a work item at once, as it refuses a
// message it cannot send (its connection closed, too many publications awaiting their
// acknowledgements); everything else goes to the server.
type refusingWork struct {
	jetstream.JetStream
	tries int
}

func (r *refusingWork) PublishMsgAsync(m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, error) {
	if subject, _ := strings.CutSuffix(events.DispatchSubjects, ">"); strings.HasPrefix(m.Subject, subject) {
		r.tries++
		return nil, nats.ErrConnectionClosed
	}
	return r.JetStream.PublishMsgAsync(m, opts...)
}

// A work item the client refuses to send stops the publication's work items: the others are
// not tried (each would be refused the same way), the events are in the stream all the same,
// and every intent's row stays in the outbox, so the slow path sends the work items later,
// promising nothing.
func TestARefusedWorkItemLeavesTheRestToTheSlowPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res, err := e.l.Submit(e.ctx, envelopes(t, "first", "second", "third"))
	require.NoError(t, err)
	keys := []identity.DeliveryKey{res[0].Key, res[1].Key, res[2].Key}
	js := &refusingWork{JetStream: e.js}
	require.Error(t, relay.New(e.l, js, relay.Config{}).PublishFor(e.ctx, keys))
	require.Equal(t, 1, js.tries, "the work items after the refused one wait for the slow path")
	ids := e.streamIDs(t, events.EventsStream)
	require.Len(t, ids, 3)
	for _, k := range keys {
		require.Equal(t, 1, ids[string(events.NewID(k, 1))], "the submission of %s is in the stream", k)
	}
	require.Empty(t, e.workItems(t))
	left, err := e.l.Unpublished(e.ctx, 10, 0)
	require.NoError(t, err)
	require.Len(t, left, 3, "no row leaves before its work item is acknowledged")

	n, err := relay.New(e.l, e.js, relay.Config{}).Drain(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	work := e.workItems(t)
	require.Len(t, work, 3)
	for _, k := range keys {
		require.False(t, work[k].Follows, "the slow path's work item promises nothing")
	}
	require.Equal(t, ids, e.streamIDs(t, events.EventsStream), "the events again, as copies JetStream drops")
}

// An intent's work item waits for JetStream's answer to every event of the intent in the
// publication, not the first: retried after a failed attempt, an intent has its failure and
// its return to pending (the transition the work item goes with) in one publication, and
// when JetStream stores the first and refuses the second, no work item goes out saying it
// follows events the stream does not hold.
func TestAWorkItemWaitsForEveryEventOfItsIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res, err := e.l.Submit(e.ctx, envelopes(t, "retried"))
	require.NoError(t, err)
	key := res[0].Key
	c, err := e.l.Begin(e.ctx, key, sha256.Sum256([]byte("x")), time.Minute)
	require.NoError(t, err)
	_, err = e.l.Authorize(e.ctx, c, time.Minute, "")
	require.NoError(t, err)
	r := relay.New(e.l, e.js, relay.Config{})
	n, err := r.Drain(e.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, n, "the submission, the claim and the authorization")
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	require.NoError(t, e.l.Retry(e.ctx, key))

	s, err := e.js.Stream(e.ctx, events.EventsStream)
	require.NoError(t, err)
	info, err := s.Info(e.ctx)
	require.NoError(t, err)
	cfg := info.Config
	cfg.MaxMsgs, cfg.Discard = int64(info.State.Msgs)+1, jetstream.DiscardNew // the failure, not the retry
	_, err = e.js.UpdateStream(e.ctx, cfg)
	require.NoError(t, err)
	before := e.workItems(t)
	require.Error(t, r.PublishFor(e.ctx, []identity.DeliveryKey{key}), "the retry's event was refused")
	ids := e.streamIDs(t, events.EventsStream)
	require.Equal(t, 1, ids[string(events.NewID(key, 4))], "the failure is in the stream")
	require.Zero(t, ids[string(events.NewID(key, 5))], "the retry is not")
	require.Equal(t, before, e.workItems(t), "no work item for the retry")
}
