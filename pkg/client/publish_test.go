package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// A published intent is stored by ingest under the key the receipt names, from the message the
// client wrote: the canonical envelope on the account's subject, the key as Nats-Msg-Id and as
// Atmost-Delivery-Key.
func TestAPublishedIntentIsIngestedUnderTheReceiptsKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	ctx := timeout(t, 30*time.Second)
	r, err := e.c.Publish(ctx, client.Intent{Account: "acct-1", Action: "post", Target: "thread-7",
		Request: map[string]any{"text": "  Hello, world \r\n", "lang": "en"}, Occurrence: "first"})
	require.NoError(t, err)
	require.Equal(t, events.IntentsStream, r.Stream)
	require.Positive(t, r.Seq)
	require.False(t, r.Duplicate)
	require.Equal(t, "acct-1", r.Account)

	want, err := identity.ParseEnvelope([]byte(`{"v":1,"account":"acct-1","action":"post","target":"thread-7","occurrence":"first","request":{"lang":"en","text":"Hello, world"}}`))
	require.NoError(t, err)
	require.Equal(t, want.DeliveryKey(), r.Key, "the key of the envelope a producer would write by hand")

	stream, err := e.JS.Stream(ctx, events.IntentsStream)
	require.NoError(t, err)
	m, err := stream.GetMsg(ctx, r.Seq)
	require.NoError(t, err)
	require.Equal(t, events.IntentSubject("acct-1"), m.Subject)
	require.Equal(t, string(want.Canonical()), string(m.Data))
	require.Equal(t, r.Key.String(), m.Header.Get(jetstream.MsgIDHeader))
	require.Equal(t, r.Key.String(), m.Header.Get(identity.DeliveryKeyHeader))

	require.Equal(t, 1, e.ingest().Created)
	in := e.Intent(r.Key)
	require.Equal(t, ledger.Pending, in.State)
	require.Equal(t, "thread-7", in.Target)
}

// Publishing the same intent again (a producer that lost its acknowledgement) is a duplicate
// JetStream drops itself; its receipt names the message stored first.
func TestPublishingAnIntentAgainIsADuplicateOfTheFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	ctx := timeout(t, 30*time.Second)
	first, err := e.c.Publish(ctx, post("acct-1", "once"))
	require.NoError(t, err)
	again, err := e.c.Publish(ctx, client.Intent{Account: "acct-1", Action: "post", Request: json.RawMessage(`{ "text" : "once" }`)})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Key, again.Key)
	require.Equal(t, first.Seq, again.Seq)
	require.Equal(t, 1, e.ingest().Created)
}

// The client refuses what ingest refuses, with the reason ingest stores: each intent below is
// published by hand as the JSON a producer would write, and refused by ingest; the client
// refuses the same intent with the same reason and publishes nothing.
func TestTheClientRefusesWhatIngestRefusesWithTheSameReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{})
	ctx := timeout(t, 60*time.Second)
	text := map[string]any{"text": "x"}
	zero := identity.SourceVersion{}
	cases := []struct {
		intent client.Intent
		raw    string // the envelope as hand-written JSON; "" to marshal it from intent
		want   identity.Reason
	}{
		{intent: client.Intent{Account: "", Action: "post", Request: text}, raw: `{"v":1,"action":"post","request":{"text":"x"}}`, want: identity.ReasonMissingField},
		{intent: client.Intent{Account: "acct-1", Request: text}, raw: `{"v":1,"account":"acct-1","request":{"text":"x"}}`, want: identity.ReasonMissingField},
		{intent: client.Intent{Account: strings.Repeat("a", identity.MaxAccountBytes+1), Action: "post", Request: text}, want: identity.ReasonInvalidAccount},
		{intent: client.Intent{Account: "a\x01b", Action: "post", Request: text}, want: identity.ReasonInvalidAccount},
		{intent: client.Intent{Account: "acct-1", Action: "Post", Request: text}, want: identity.ReasonInvalidAction},
		{intent: client.Intent{Account: "acct-1", Action: "post", Target: "t\x00", Request: text}, want: identity.ReasonInvalidTarget},
		{intent: client.Intent{Account: "acct-1", Action: "post", Target: strings.Repeat("t", identity.MaxTargetBytes+1), Request: text}, want: identity.ReasonInvalidTarget},
		{intent: client.Intent{Account: "acct-1", Action: "post", Request: []byte(`[1]`)}, want: identity.ReasonInvalidRequest},
		{intent: client.Intent{Account: "acct-1", Action: "post", Request: map[string]any{"text": 5}}, want: identity.ReasonInvalidRequest},
		{intent: client.Intent{Account: "acct-1", Action: "post", Request: json.RawMessage(`{"n":12345678901234567890}`)}, want: identity.ReasonInvalidRequest},
		{intent: client.Intent{Account: "acct-1", Action: "post", Request: text, Occurrence: strings.Repeat("o", identity.MaxOccurrenceBytes+1)}, want: identity.ReasonInvalidOccurrence},
		{intent: client.Intent{Account: "acct-1", Action: "post", Request: text, Source: &identity.Source{ID: "https://example.org/a", Version: zero}},
			raw: `{"v":1,"account":"acct-1","action":"post","request":{"text":"x"},"source":{"id":"https://example.org/a","version":"` + zero.String() + `"}}`, want: identity.ReasonInvalidSource},
		{intent: client.Intent{Account: "acct-1", Action: "post", Request: map[string]any{"text": strings.Repeat("y", identity.MaxEnvelopeBytes)}}, want: identity.ReasonTooLarge},
		{intent: client.Intent{Account: "acct-\xff", Action: "post", Request: text},
			raw: "{\"v\":1,\"account\":\"acct-\xff\",\"action\":\"post\",\"request\":{\"text\":\"x\"}}", want: identity.ReasonInvalidUTF8},
	}
	stream, err := e.JS.Stream(ctx, events.IntentsStream)
	require.NoError(t, err)
	for n, c := range cases {
		_, err := e.c.Publish(ctx, c.intent)
		var rej *identity.RejectError
		require.ErrorAs(t, err, &rej, "case %d", n)
		require.Equal(t, c.want, rej.Reason, "case %d: %v", n, err)
		require.NotErrorIs(t, err, client.ErrMaybePublished)
		info, err := stream.Info(ctx)
		require.NoError(t, err)
		require.Equal(t, uint64(n), info.State.Msgs, "case %d: the client published nothing", n)

		raw := c.raw
		if raw == "" {
			doc := map[string]any{"v": 1, "account": c.intent.Account, "action": c.intent.Action, "request": c.intent.Request}
			if c.intent.Target != "" {
				doc["target"] = c.intent.Target
			}
			if c.intent.Occurrence != "" {
				doc["occurrence"] = c.intent.Occurrence
			}
			b, err := json.Marshal(doc)
			require.NoError(t, err)
			raw = string(b)
		}
		_, err = e.JS.PublishMsg(ctx, &nats.Msg{Subject: events.IntentSubject("acct-1"), Data: []byte(raw), Header: nats.Header{jetstream.MsgIDHeader: []string{fmt.Sprint("raw-", n)}}})
		require.NoError(t, err)
		require.Equal(t, 1, e.ingest().Rejected, "case %d: ingest refuses %s", n, raw)
		stored, err := e.Ledger.Rejects(ctx, "", 1)
		require.NoError(t, err)
		require.Equal(t, string(c.want), stored[0].Reason, "case %d: %s", n, stored[0].Detail)
	}
}

// A publish whose acknowledgement never comes is "may have been published", never a plain
// failure; one that no stream takes, or that JetStream refuses, certainly stored nothing.
func TestAPublishWithoutAnAcknowledgementMayHaveBeenPublished(t *testing.T) {
	t.Parallel()
	srv := natstest.New(t)
	nc := connect(t, srv.URL)
	c, err := client.New(nc, client.Config{AckTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	ctx := timeout(t, 30*time.Second)

	// No stream and nobody listening: nothing can have been stored.
	_, err = c.Publish(ctx, post("acct-1", "into the void"))
	require.Error(t, err)
	require.NotErrorIs(t, err, client.ErrMaybePublished)
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse)

	// Something takes the message and never acknowledges it: it may be stored.
	swallowed := make(chan *nats.Msg, 4)
	sub, err := connect(t, srv.URL).ChanSubscribe(events.IntentSubjects, swallowed)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	_, err = c.Publish(ctx, post("acct-1", "unanswered"))
	require.ErrorIs(t, err, client.ErrMaybePublished)
	var maybe *client.MaybePublishedError
	require.ErrorAs(t, err, &maybe)
	require.ErrorIs(t, maybe.Err, jetstream.ErrAsyncPublishTimeout)
	env, _ := post("acct-1", "unanswered").Envelope()
	require.Equal(t, env.DeliveryKey(), maybe.Key)
	require.Equal(t, maybe.Key.String(), (<-swallowed).Header.Get(jetstream.MsgIDHeader), "the message did leave")

	// A caller that stops waiting gets the same answer.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = c.Publish(short, post("acct-1", "no patience"))
	require.ErrorIs(t, err, client.ErrMaybePublished)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, sub.Unsubscribe())

	// JetStream refuses a message its stream cannot take (here: too large): nothing stored.
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: events.IntentsStream, Subjects: []string{events.IntentSubjects}, MaxMsgSize: 64})
	require.NoError(t, err)
	_, err = c.Publish(ctx, post("acct-1", "a text longer than the stream takes, which is sixty-four bytes"))
	require.Error(t, err)
	require.NotErrorIs(t, err, client.ErrMaybePublished)
	var api *jetstream.APIError
	require.ErrorAs(t, err, &api)
	require.Equal(t, 400, api.Code)

	// A server that goes away while an acknowledgement is awaited: may be stored.
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"elsewhere"}})
	require.NoError(t, err)
	require.NoError(t, js.DeleteStream(ctx, events.IntentsStream))
	_, err = connect(t, srv.URL).ChanSubscribe(events.IntentSubjects, swallowed)
	require.NoError(t, err)
	f, err := c.PublishAsync(ctx, post("acct-1", "the server goes away"))
	require.NoError(t, err)
	<-swallowed
	srv.Shutdown()
	_, err = f.Wait(ctx)
	require.ErrorIs(t, err, client.ErrMaybePublished)
	require.True(t, errors.Is(err, nats.ErrDisconnected) || errors.Is(err, jetstream.ErrAsyncPublishTimeout), "%v", err)
}

// PublishAll publishes many intents with a bounded number in flight and returns their
// receipts in order; ingest stores each under its receipt's key.
func TestPublishAllReturnsEveryReceiptInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, client.Config{MaxInFlight: 16})
	ctx := timeout(t, 60*time.Second)
	var intents []client.Intent
	for i := range 500 {
		intents = append(intents, post(fmt.Sprintf("acct-%d", 1+i%2), fmt.Sprint("many ", i)))
	}
	intents = append(intents, client.Intent{Account: "acct-1", Action: "BAD", Request: map[string]any{}})
	results := e.c.PublishAll(ctx, intents)
	require.Len(t, results, len(intents))
	var keys []identity.DeliveryKey
	seqs := map[uint64]bool{}
	for i, r := range results[:500] {
		require.NoError(t, r.Err)
		env, err := intents[i].Envelope()
		require.NoError(t, err)
		require.Equal(t, env.DeliveryKey(), r.Receipt.Key)
		require.False(t, seqs[r.Receipt.Seq])
		seqs[r.Receipt.Seq] = true
		keys = append(keys, r.Receipt.Key)
	}
	var rej *identity.RejectError
	require.ErrorAs(t, results[500].Err, &rej)
	require.Equal(t, identity.ReasonInvalidAction, rej.Reason)
	require.Equal(t, 500, e.ingest().Created)
	got, err := e.Ledger.GetMany(ctx, keys)
	require.NoError(t, err)
	require.Len(t, got, 500)
}

// A stream that answers with a server error (here: a store that failed, its limit reached) may
// have stored the message, or be storing it: the answer is "may have been published", and
// publishing the same intent again is the remedy, never a new occurrence.
func TestAServerErrorOfTheStreamMayHaveBeenPublished(t *testing.T) {
	t.Parallel()
	srv := natstest.New(t)
	nc := connect(t, srv.URL)
	c, err := client.New(nc, client.Config{})
	require.NoError(t, err)
	ctx := timeout(t, 30*time.Second)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: events.IntentsStream, Subjects: []string{events.IntentSubjects},
		MaxMsgs: 1, Discard: jetstream.DiscardNew})
	require.NoError(t, err)
	_, err = c.Publish(ctx, post("acct-1", "the one the stream holds"))
	require.NoError(t, err)

	_, err = c.Publish(ctx, post("acct-1", "one too many"))
	var api *jetstream.APIError
	require.ErrorAs(t, err, &api)
	require.GreaterOrEqual(t, api.Code, 500, "%v", err)
	require.ErrorIs(t, err, client.ErrMaybePublished)
}

// cutDialer dials the real server, and fails the first write of at least cutAt bytes once armed
// after writing all of it: a connection reset or a write deadline that came after the bytes
// reached the server.
type cutDialer struct {
	armed atomic.Bool
	cutAt int
}

func (d *cutDialer) Dial(network, address string) (net.Conn, error) {
	c, err := net.Dial(network, address)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: c, d: d}, nil
}

type cutConn struct {
	net.Conn
	d *cutDialer
}

func (c *cutConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil && len(b) >= c.d.cutAt && c.d.armed.CompareAndSwap(true, false) {
		return n, errors.New("write: connection reset by peer (after the bytes left)")
	}
	return n, err
}

// nats.go writes a full buffer to the socket within the publish: a write that fails there may
// have delivered the message, which the stream then stores. Such a publish may have been
// published, never "not published".
func TestAPublishWhoseWriteFailedMayHaveBeenPublished(t *testing.T) {
	t.Parallel()
	srv := natstest.New(t)
	js := srv.Streams(t)
	ctx := timeout(t, 30*time.Second)
	const buffer = 32 << 10 // nats.go's write buffer: a message this large is written at once
	d := &cutDialer{cutAt: buffer}
	nc := connect(t, srv.URL, nats.SetCustomDialer(d), nats.WriteBufferSize(buffer))
	c, err := client.New(nc, client.Config{})
	require.NoError(t, err)

	intent := post("acct-1", strings.Repeat("a long text ", (buffer+1024)/12))
	env, err := intent.Envelope()
	require.NoError(t, err)
	d.armed.Store(true)
	_, err = c.PublishAsync(ctx, intent)
	require.ErrorIs(t, err, client.ErrMaybePublished)
	require.False(t, d.armed.Load(), "the write failed")

	stream, err := js.Stream(ctx, events.IntentsStream)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		m, err := stream.GetLastMsgForSubject(ctx, events.IntentSubject("acct-1"))
		return err == nil && m.Header.Get(jetstream.MsgIDHeader) == env.DeliveryKey().String()
	}, 10*time.Second, 10*time.Millisecond, "the stream stored the message whose write failed")
}
