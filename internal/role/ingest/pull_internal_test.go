package ingest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/events"
)

// newTestPuller is a puller on a consumer of its own of a fresh ATMOST_INTENTS, with the
// server it runs on.
func newTestPuller(t *testing.T) (*puller, jetstream.JetStream, *natstest.Server) {
	t.Helper()
	ctx := context.Background()
	srv := natstest.New(t)
	js := srv.Streams(t)
	_, err := js.CreateOrUpdateConsumer(ctx, events.IntentsStream, jetstream.ConsumerConfig{
		Durable: "ingest", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, FilterSubject: events.IntentSubjects,
	})
	require.NoError(t, err)
	return newPuller(js, events.IntentsStream, "ingest"), js, srv
}

// Every fetch's requests are answered on the one subscription the first fetch made: a
// subscription per request cost the server a SUB and an UNSUB each, and the client a 512 KiB
// channel.
func TestFetchesShareOneSubscription(t *testing.T) {
	t.Parallel()
	p, js, srv := newTestPuller(t)
	ctx := context.Background()
	_, err := p.fetch(ctx, 10, 10*time.Millisecond, 0) // idle: two requests
	require.NoError(t, err)
	before := srv.SubscriptionsMade(t)
	for i := range 20 {
		_, err := js.Publish(ctx, events.IntentSubject("acct-1"), []byte{byte(i)})
		require.NoError(t, err)
		msgs, err := p.fetch(ctx, 10, time.Second, time.Millisecond) // what is waiting: one request
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.NoError(t, p.ack(msgs[0]))
		_, err = p.fetch(ctx, 10, 10*time.Millisecond, 0) // idle again
		require.NoError(t, err)
	}
	require.Zero(t, srv.SubscriptionsMade(t)-before, "60 requests after the first fetch")
}

// abandon sends a pull request that stops waiting long before the server is done with it,
// while nothing is there to fetch: the server holds it, and the kept subscription is interest
// in its reply subject.
func abandon(t *testing.T, p *puller) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	msgs, err := p.request(context.Background(), pullRequest{Batch: 1, Expires: 10 * time.Second}, 50*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, msgs, "nothing published yet")
}

// publishToTheAbandoned publishes one message and waits until the server has delivered it to
// the abandoned request: it lies in p's subscription, no fetch waiting for it.
func publishToTheAbandoned(t *testing.T, p *puller, js jetstream.JetStream, data string) {
	t.Helper()
	_, err := js.Publish(context.Background(), events.IntentSubject("acct-1"), []byte(data))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		n, _, err := p.sub.Pending()
		return err == nil && n == 1
	}, 5*time.Second, time.Millisecond, "the server delivers to the request that stopped waiting")
}

// What the server delivers to a request that stopped waiting it holds as delivered, so the next
// fetch takes it, rather than the consumer's ack wait (a minute here) bringing it back.
func TestADeliveryToAnEarlierRequestIsTakenByTheNextFetch(t *testing.T) {
	t.Parallel()
	p, js, _ := newTestPuller(t)
	abandon(t, p)
	publishToTheAbandoned(t, p, js, "late")
	msgs, err := p.fetch(context.Background(), 10, 10*time.Millisecond, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, "late", string(msgs[0].Data))
}

// When ingest stops, what its subscription holds undelivered goes back to the server at once,
// for another ingester, rather than after the consumer's ack wait (a minute here).
func TestCloseGivesBackWhatTheSubscriptionHolds(t *testing.T) {
	t.Parallel()
	p, js, srv := newTestPuller(t)
	abandon(t, p)
	publishToTheAbandoned(t, p, js, "held")
	require.NoError(t, p.close())

	other, err := jetstream.New(srv.Connect(t))
	require.NoError(t, err)
	q := newPuller(other, events.IntentsStream, "ingest")
	msgs, err := q.fetch(context.Background(), 10, 5*time.Second, 0)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "given back, so another ingester takes it well within the ack wait")
	require.Equal(t, "held", string(msgs[0].Data))
	require.NoError(t, q.close())
}

// An earlier request's status (here the 408 of one that expired after it stopped waiting) lies
// in the subscription every request shares; it ends nothing but that request. Taken for the
// current request's own, it would end this one's wait for the first message at once.
func TestAnEarlierRequestsStatusEndsNoOtherRequest(t *testing.T) {
	t.Parallel()
	p, js, _ := newTestPuller(t)
	ctx := context.Background()
	p.mu.Lock()
	defer p.mu.Unlock()
	msgs, err := p.request(ctx, pullRequest{Batch: 1, Expires: 100 * time.Millisecond}, 10*time.Millisecond)
	require.NoError(t, err)
	require.Empty(t, msgs)
	require.Eventually(t, func() bool {
		n, _, err := p.sub.Pending()
		return err == nil && n == 1
	}, 5*time.Second, time.Millisecond, "the stopped request's 408 arrives at its expiry")

	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = js.Publish(ctx, events.IntentSubject("acct-1"), []byte("after"))
	}()
	msgs, err = p.request(ctx, pullRequest{Batch: 1, Expires: 10 * time.Second}, 11*time.Second)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the request waited for its message past the earlier one's status")
	require.Equal(t, "after", string(msgs[0].Data))
}

// After an idle wait the fetch also takes what arrived with its first message: a burst that
// lands while ingest waits is one batch, not its first message alone and the rest a linger
// later. (The burst is one atomic batch, stored at once, before the fetch can ask again.)
func TestAnIdleFetchTakesTheBurstItsFirstMessageCameWith(t *testing.T) {
	t.Parallel()
	p, js, srv := newTestPuller(t)
	ctx := context.Background()
	stream, err := js.Stream(ctx, events.IntentsStream)
	require.NoError(t, err)
	cfg := stream.CachedInfo().Config
	cfg.AllowAtomicPublish = true
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)

	type fetched struct {
		msgs []*nats.Msg
		err  error
	}
	got := make(chan fetched, 1)
	go func() {
		msgs, err := p.fetch(ctx, 10, time.Minute, 10*time.Millisecond)
		got <- fetched{msgs, err}
	}()
	consumer, err := js.Consumer(ctx, events.IntentsStream, "ingest")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := consumer.Info(ctx)
		return err == nil && info.NumWaiting == 1
	}, 5*time.Second, time.Millisecond, "the fetch waits at the server for a first message")

	nc := srv.Connect(t)
	for i := 1; i <= 3; i++ {
		m := nats.NewMsg(events.IntentSubject("acct-1"))
		m.Data = []byte{byte(i)}
		m.Header.Set("Nats-Batch-Id", "burst")
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i))
		if i < 3 {
			require.NoError(t, nc.PublishMsg(m))
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		reply, err := nc.RequestMsg(m, 5*time.Second)
		require.NoError(t, err)
		require.NotContains(t, string(reply.Data), `"error"`, "the burst is stored")
	}
	select {
	case f := <-got:
		require.NoError(t, f.err)
		require.Len(t, f.msgs, 3, "the burst is one batch")
	case <-time.After(time.Minute):
		t.Fatal("the fetch took nothing")
	}
}
