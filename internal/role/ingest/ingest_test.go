package ingest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

type env struct {
	*worldtest.World
	in *ingest.Ingester
}

func mustPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func newEnv(t *testing.T) *env {
	t.Helper()
	w := worldtest.New(t)
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	in, err := ingest.New(w.Ctx, w.JS, w.Ledger, ingest.Config{MaxWait: 200 * time.Millisecond})
	require.NoError(t, err)
	return &env{World: w, in: in}
}

func (e *env) publish(account, body string, header nats.Header) {
	e.T.Helper()
	_, err := e.JS.PublishMsg(e.Ctx, &nats.Msg{Subject: events.IntentSubject(account), Data: []byte(body), Header: header})
	require.NoError(e.T, err)
}

// drain runs batches until one finds nothing, and adds up what they did.
func (e *env) drain() ingest.Stats {
	e.T.Helper()
	var total ingest.Stats
	for i := 0; i < 50; i++ {
		s, err := e.in.Batch(e.Ctx)
		require.NoError(e.T, err)
		if s == (ingest.Stats{}) {
			return total
		}
		total.Created += s.Created
		total.Duplicates += s.Duplicates
		total.Rejected += s.Rejected
	}
	e.T.Fatal("the stream never ran dry")
	return total
}

func post(text string) string {
	return fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":%q}}`, text)
}

func TestRepublishedIntentsBecomeOneIntentEach(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("acct-1", post("one"), nil)
	e.publish("acct-1", post("two"), nil)
	e.publish("acct-1", post("one"), nil)                                                           // the producer published it again
	e.publish("acct-1", `{"request":{"text":"one"},"action":"post","account":"acct-1","v":1}`, nil) // respelt
	s := e.drain()
	require.Equal(t, ingest.Stats{Created: 2, Duplicates: 2}, s)
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM intents`))

	e.settled() // nothing is left for redelivery: everything was acknowledged
}

// One test per rejection reason ingest can meet: a row in rejects, a message on
// atmost.rejected.<reason>, and the consumer carries on with the rest of the batch.
func TestEveryRejectionIsStoredPublishedAndAcknowledged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good, err := identity.ParseEnvelope([]byte(post("fine")))
	require.NoError(t, err)
	cases := []struct {
		reason identity.Reason
		body   string
		header nats.Header
		on     string // the account whose subject it is published on; "" for acct-1
	}{
		{identity.ReasonMalformedJSON, `{"v":1,`, nil, ""},
		{identity.ReasonNotObject, `[1,2]`, nil, ""},
		{identity.ReasonDuplicateField, `{"v":1,"v":1,"account":"acct-1","action":"post","request":{}}`, nil, ""},
		{identity.ReasonUnknownField, `{"v":1,"account":"acct-1","action":"post","request":{},"send_twice":true}`, nil, ""},
		{identity.ReasonMissingField, `{"v":1,"account":"acct-1","request":{}}`, nil, ""},
		{identity.ReasonUnsupportedVersion, `{"v":2,"account":"acct-1","action":"post","request":{}}`, nil, ""},
		{identity.ReasonInvalidUTF8, "{\"v\":1,\"account\":\"acct-1\",\"action\":\"post\",\"request\":{\"text\":\"\xff\"}}", nil, ""},
		{identity.ReasonTooLarge, post(strings.Repeat("x", identity.MaxEnvelopeBytes)), nil, ""},
		{identity.ReasonInvalidAccount, `{"v":1,"account":"","action":"post","request":{}}`, nil, ""},
		{identity.ReasonInvalidAction, `{"v":1,"account":"acct-1","action":"Post!","request":{}}`, nil, ""},
		{identity.ReasonInvalidRequest, `{"v":1,"account":"acct-1","action":"post","request":"text"}`, nil, ""},
		{identity.ReasonSubjectMismatch, `{"v":1,"account":"acct-2","action":"post","request":{}}`, nil, ""},
		{identity.ReasonUnknownAccount, `{"v":1,"account":"acct-nobody","action":"post","request":{}}`, nil, "acct-nobody"},
		{identity.ReasonInvalidKeyHeader, post("fine"), nats.Header{identity.DeliveryKeyHeader: []string{"not-a-key"}}, ""},
		{identity.ReasonKeyMismatch, post("fine"), nats.Header{identity.DeliveryKeyHeader: []string{"dk1:" + strings.Repeat("0", 64)}}, ""},
		{identity.ReasonKeyMismatch, post("fine"), nats.Header{identity.DeliveryKeyHeader: []string{good.DeliveryKey().String(), "dk1:" + strings.Repeat("1", 64)}}, ""},
	}
	seqs := map[uint64]int{}
	for i, c := range cases {
		on := c.on
		if on == "" {
			on = "acct-1"
		}
		header := nats.Header{jetstream.MsgIDHeader: []string{fmt.Sprintf("producer-%d", i)}}
		for k, v := range c.header {
			header[k] = v
		}
		ack, err := e.JS.PublishMsg(e.Ctx, &nats.Msg{Subject: events.IntentSubject(on), Data: []byte(c.body), Header: header})
		require.NoError(t, err)
		seqs[ack.Sequence] = i
	}
	e.publish("acct-1", post("fine"), nats.Header{identity.DeliveryKeyHeader: []string{good.DeliveryKey().String()}})
	s := e.drain()
	require.Equal(t, len(cases), s.Rejected)
	require.Equal(t, 1, s.Created, "the good message in the same batches went through")

	for _, c := range cases {
		want := 1
		if c.reason == identity.ReasonKeyMismatch {
			want = 2 // a header of another key, first or second of its values
		}
		require.Equal(t, want, e.Count(`SELECT count(*) FROM rejects WHERE reason = $1`, string(c.reason)), "rejects row for %s", c.reason)
		stream, err := e.JS.Stream(e.Ctx, events.RejectsStream)
		require.NoError(t, err)
		m, err := stream.GetLastMsgForSubject(e.Ctx, events.RejectSubject(c.reason))
		require.NoError(t, err, "message on %s", events.RejectSubject(c.reason))
		require.Equal(t, string(c.reason), m.Header.Get("Atmost-Reason"))
	}
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM rejects WHERE raw_truncated AND raw_size > $1`, ledger.MaxRejectRaw),
		"an oversized message is kept bounded, with its size")

	// Each reject names the message it refused as its producer knows it: the sequence of the
	// publish acknowledgement and the producer's Nats-Msg-Id; with the reason's detail, and
	// the account and key where the envelope itself was valid.
	published := e.publishedRejects()
	require.Len(t, published, len(cases))
	stored := e.rejectsBySeq()
	for seq, i := range seqs {
		c := cases[i]
		r, ok := published[seq]
		require.True(t, ok, "reject of %s", c.reason)
		require.Equal(t, c.reason, r.Reason)
		require.Equal(t, events.IntentsStream, r.Stream)
		require.Equal(t, fmt.Sprintf("producer-%d", i), r.MsgID, c.reason)
		require.Equal(t, stored[int64(seq)].Detail, r.Detail, c.reason)
		require.NotEmpty(t, r.Detail, c.reason)
		on := c.on
		if on == "" {
			on = "acct-1"
		}
		require.Equal(t, events.IntentSubject(on), r.Subject)
		env, err := identity.ParseEnvelope([]byte(c.body))
		if err != nil {
			require.Nil(t, r.DeliveryKey, "%s: no key without a valid envelope", c.reason)
			continue
		}
		require.NotNil(t, r.DeliveryKey, c.reason)
		require.Equal(t, env.DeliveryKey(), *r.DeliveryKey, c.reason)
		require.Equal(t, env.Account, r.Account, c.reason)
	}
}

// A redelivered bad message is stored and published once.
func TestARedeliveredRejectIsStoredOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("acct-1", `not json`, nil)
	require.Equal(t, 1, e.drain().Rejected)
	// The same stream message again, as a redelivery would bring it: reset the consumer.
	require.NoError(t, e.JS.DeleteConsumer(e.Ctx, events.IntentsStream, "ingest"))
	l, err := ledger.New(e.DB.Pool, ledger.Config{})
	require.NoError(t, err)
	in, err := ingest.New(e.Ctx, e.JS, l, ingest.Config{MaxWait: 200 * time.Millisecond})
	require.NoError(t, err)
	s, err := in.Batch(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, 1, s.Rejected)
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM rejects`))
	stream, err := e.JS.Stream(e.Ctx, events.RejectsStream)
	require.NoError(t, err)
	info, err := stream.Info(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs, "the second publish was a duplicate")
}

// When the ledger cannot take a batch, the batch is nak'ed with a delay and comes back:
// nothing is lost, nothing is doubled.
func TestABatchTheLedgerCannotTakeIsRedelivered(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("acct-1", post("kept"), nil)
	e.publish("acct-1", `bad`, nil)

	down, err := pgxpool.New(e.Ctx, e.DB.URL)
	require.NoError(t, err)
	down.Close() // a ledger whose database is gone
	broken, err := ledger.New(down, ledger.Config{MaxRetries: 1})
	require.NoError(t, err)
	in, err := ingest.New(e.Ctx, e.JS, broken, ingest.Config{MaxWait: 200 * time.Millisecond, NakDelay: 100 * time.Millisecond})
	require.NoError(t, err)
	s, err := in.Batch(e.Ctx)
	require.Error(t, err)
	require.Equal(t, 2, s.Retried)
	require.Zero(t, e.Count(`SELECT count(*) FROM intents`))

	time.Sleep(300 * time.Millisecond) // past the nak delay
	got := e.drain()
	require.Equal(t, 1, got.Created)
	require.Equal(t, 1, got.Rejected)
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM intents`))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM rejects`))
}

// The same intent published twice with a Nats-Msg-Id is stored once by JetStream itself; the
// same intent published again without one reaches ingest and becomes a duplicate in the
// ledger. Either way: one intent.
func TestPublishedTwiceWithAndWithoutMsgIDIsOneIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	withID := nats.Header{jetstream.MsgIDHeader: []string{"producer-42"}}
	e.publish("acct-1", post("once"), withID)
	e.publish("acct-1", post("once"), withID)
	e.publish("acct-1", post("once"), nil)
	stream, err := e.JS.Stream(e.Ctx, events.IntentsStream)
	require.NoError(t, err)
	info, err := stream.Info(e.Ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(2), info.State.Msgs, "JetStream dropped the second publish with the same id")
	require.Equal(t, ingest.Stats{Created: 1, Duplicates: 1}, e.drain())
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM intents`))
}

// A batch names what the outbox holds of its stored intents, created or found stored, for its
// caller to publish: a redelivery of a batch whose ingester died before publishing must still
// get them out at once, and a redelivery of one that published names nothing.
func TestABatchNamesTheOutboxRowsOfWhatItCreatedAndFoundStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.publish("acct-1", post("first"), nil)
	e.publish("acct-1", post("second"), nil)
	e.publish("acct-1", `{"v":1,"account":"nobody","action":"post","request":{"text":"x"}}`, nil)
	want := map[identity.DeliveryKey]bool{keyOf(t, "first"): true, keyOf(t, "second"): true}
	names := func() map[identity.DeliveryKey]bool {
		got := map[identity.DeliveryKey]bool{}
		for range 50 {
			s, rows, err := e.in.BatchWritten(e.Ctx)
			require.NoError(t, err)
			for _, u := range rows.Rows {
				require.Equal(t, ledger.Pending, u.To)
				require.True(t, u.Dispatch, "a submitted transition asks for dispatch")
				got[u.Key] = true
			}
			// At SERIALIZABLE the publisher reads these intents' rows back.
			unread, err := e.Ledger.UnpublishedFor(e.Ctx, rows.Unread)
			require.NoError(t, err)
			for _, u := range unread {
				got[u.Key] = true
			}
			if s == (ingest.Stats{}) {
				return got
			}
		}
		t.Fatal("the stream never ran dry")
		return nil
	}
	require.Equal(t, want, names(), "the created ones; never a rejected message's")
	e.publish("acct-1", post("second"), nil) // redelivered, or published again
	require.Equal(t, map[identity.DeliveryKey]bool{keyOf(t, "second"): true}, names(), "a duplicate's unpublished transition too")
	_, err := e.Relay.Drain(e.Ctx)
	require.NoError(t, err)
	e.publish("acct-1", post("second"), nil)
	require.Empty(t, names(), "a duplicate whose transitions were published")
}

func keyOf(t *testing.T, text string) identity.DeliveryKey {
	t.Helper()
	env, err := identity.ParseEnvelope([]byte(post(text)))
	require.NoError(t, err)
	return env.DeliveryKey()
}

// The subject binds the account: an envelope is an intent only when it came on
// atmost.intent.<its account's token>, whatever else the subject spells. NATS permissions
// restrict subjects, so this is what keeps a producer to the accounts it may publish for.
func TestAnEnvelopeOnAnotherAccountsSubjectIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-2', 'sim'), ('team.a', 'sim')`)
	body := func(account, text string) string {
		return fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":%q}}`, account, text)
	}
	cases := []struct {
		name, subject, body string
		want                identity.Reason // "" for an intent
	}{
		{"its own subject", events.IntentSubject("acct-2"), body("acct-2", "own"), ""},
		{"an escaped token", events.IntentSubject("team.a"), body("team.a", "escaped"), ""},
		{"another configured account's subject", events.IntentSubject("acct-1"), body("acct-2", "theirs"), identity.ReasonSubjectMismatch},
		{"the account spelt as two tokens", "atmost.intent.team.a", body("team.a", "two tokens"), identity.ReasonSubjectMismatch},
		{"a token after the account's", "atmost.intent.acct-2.x", body("acct-2", "longer"), identity.ReasonSubjectMismatch},
		{"a non-canonical escape of the account", "atmost.intent.~YWNjdC0y", body("acct-2", "escaped plain"), identity.ReasonSubjectMismatch},
	}
	seqs := map[uint64]int{}
	for i, c := range cases {
		ack, err := e.JS.PublishMsg(e.Ctx, &nats.Msg{Subject: c.subject, Data: []byte(c.body)})
		require.NoError(t, err, c.name)
		seqs[ack.Sequence] = i
	}
	s := e.drain()
	require.Equal(t, ingest.Stats{Created: 2, Rejected: 4}, s)
	stored := e.rejectsBySeq()
	for seq, i := range seqs {
		c := cases[i]
		env, err := identity.ParseEnvelope([]byte(c.body))
		require.NoError(t, err)
		_, getErr := e.Ledger.Get(e.Ctx, env.DeliveryKey())
		r, rejected := stored[int64(seq)]
		if c.want == "" {
			require.NoError(t, getErr, c.name)
			require.False(t, rejected, c.name)
			continue
		}
		require.Error(t, getErr, "%s: no intent", c.name)
		require.True(t, rejected, c.name)
		require.Equal(t, string(c.want), r.Reason, c.name)
		require.Contains(t, r.Detail, events.IntentSubject(env.Account), "%s: the detail names the right subject", c.name)
		require.Contains(t, r.Detail, c.subject, "%s: and the one it came on", c.name)
	}
}

// A fetch takes what has arrived and never waits for its batch to fill: an intent published
// under a light load is stored at once, not after Batch-1 more or MaxWait. The ingester here
// would wait an hour for a full batch; the test's deadline is 20 seconds.
func TestABatchIsWhatHasArrivedNotAFullOne(t *testing.T) {
	t.Parallel()
	w := worldtest.New(t)
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	in, err := ingest.New(w.Ctx, w.JS, w.Ledger, ingest.Config{Batch: 100, MaxWait: time.Hour, Linger: -1})
	require.NoError(t, err)
	e := &env{World: w, in: in}
	ctx, cancel := context.WithTimeout(w.Ctx, 20*time.Second)
	defer cancel()

	for _, text := range []string{"one", "two", "three"} {
		e.publish("acct-1", post(text), nil)
	}
	s, err := in.Batch(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, s.Created, "the three that were waiting, in one batch")

	// Idle, the fetch waits for the first to arrive and takes it with whatever else is there.
	published := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, err := w.JS.Publish(ctx, events.IntentSubject("acct-1"), []byte(post("four")))
		published <- err
	}()
	s, err = in.Batch(ctx)
	require.NoError(t, err)
	require.NoError(t, <-published)
	require.Equal(t, 1, s.Created)
}

// A fetch with less than a batch that comes within Linger of the previous batch waits for more
// until Linger has passed since that batch: under a steady load the intents that arrive close
// together share a batch, and so the ledger's statements. Without a linger the first goes
// alone. (The second is published 300 ms after the first; the linger here is a second.)
func TestAFetchLingersForTheIntentsRightBehindItsFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		linger time.Duration
		first  int
	}{{time.Second, 2}, {-1, 1}} {
		w, in, ctx := afterABatch(t, tc.linger)
		published := publishApart(ctx, w, 300*time.Millisecond, "first", "right behind")
		s, err := in.Batch(ctx)
		require.NoError(t, err)
		require.Equal(t, tc.first, s.Created, "linger %s", tc.linger)
		require.NoError(t, <-published)
		require.NoError(t, <-published)
	}
}

// The linger counts from the previous batch, not from a batch's first message: after a quiet
// spell longer than the linger the first intent is taken at once, and whatever arrives right
// behind it goes in the next batch. (The quiet spell is 1.2 s, the linger a second, and the
// second intent comes 300 ms after the first.)
func TestTheFirstIntentAfterAQuietSpellIsTakenAtOnce(t *testing.T) {
	t.Parallel()
	w, in, ctx := afterABatch(t, time.Second)
	time.Sleep(1200 * time.Millisecond)
	published := publishApart(ctx, w, 300*time.Millisecond, "first", "right behind")
	s, err := in.Batch(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, s.Created, "the first, taken at once")
	require.NoError(t, <-published)
	require.NoError(t, <-published)
	s, err = in.Batch(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, s.Created, "the one right behind it")
}

// afterABatch is an ingester with linger that has just taken a batch (of one intent), and a
// context that ends the test's wait after 20 seconds.
func afterABatch(t *testing.T, linger time.Duration) (*worldtest.World, *ingest.Ingester, context.Context) {
	t.Helper()
	w := worldtest.New(t)
	w.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	in, err := ingest.New(w.Ctx, w.JS, w.Ledger, ingest.Config{Batch: 100, MaxWait: time.Hour, Linger: linger})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(w.Ctx, 20*time.Second)
	t.Cleanup(cancel)
	_, err = w.JS.Publish(ctx, events.IntentSubject("acct-1"), []byte(post("the previous batch")))
	require.NoError(t, err)
	s, err := in.Batch(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, s.Created)
	return w, in, ctx
}

// publishApart publishes a post of each text, pause apart, and sends each publication's error.
func publishApart(ctx context.Context, w *worldtest.World, pause time.Duration, texts ...string) <-chan error {
	published := make(chan error, len(texts))
	go func() {
		for i, text := range texts {
			if i > 0 {
				time.Sleep(pause)
			}
			_, err := w.JS.Publish(ctx, events.IntentSubject("acct-1"), []byte(post(text)))
			published <- err
		}
	}()
	return published
}
