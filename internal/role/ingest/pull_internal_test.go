package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/events"
)

// newTestPuller is a puller on a consumer of its own of a fresh ATMOST_INTENTS, with the
// server it runs on.
func newTestPuller(t *testing.T) (*puller, jetstream.JetStream, *natstest.Server) {
	t.Helper()
	ctx := context.Background()
	srv := natstest.New(t)
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, streams.Ensure(ctx, nc, js, streams.Config{}))
	_, err = js.CreateOrUpdateConsumer(ctx, events.IntentsStream, jetstream.ConsumerConfig{
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
		msgs, err := p.fetch(ctx, 10, time.Second, time.Millisecond) // a request, and one after the linger
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.NoError(t, p.ack(msgs[0]))
		_, err = p.fetch(ctx, 10, 10*time.Millisecond, 0) // idle again
		require.NoError(t, err)
	}
	require.Zero(t, srv.SubscriptionsMade(t)-before, "80 requests after the first fetch")
}

// A request that stopped waiting before the server answered it (its answer time passed) still
// has the server's interest: its reply subject is under the subscription every request shares.
// What the server delivers there it holds as delivered, so the next fetch takes it, rather than
// the consumer's ack wait (a minute here) bringing it back.
func TestADeliveryToAnEarlierRequestIsTakenByTheNextFetch(t *testing.T) {
	t.Parallel()
	p, js, _ := newTestPuller(t)
	ctx := context.Background()
	p.mu.Lock()
	msgs, err := p.request(ctx, pullRequest{Batch: 1, Expires: 10 * time.Second}, 50*time.Millisecond)
	p.mu.Unlock()
	require.NoError(t, err)
	require.Empty(t, msgs, "nothing published yet: the request gave up, the server still holds it")
	_, err = js.Publish(ctx, events.IntentSubject("acct-1"), []byte("late"))
	require.NoError(t, err)
	var got []string
	require.Eventually(t, func() bool {
		msgs, err := p.fetch(ctx, 10, 10*time.Millisecond, 0)
		require.NoError(t, err)
		for _, m := range msgs {
			got = append(got, string(m.Data))
		}
		return len(got) > 0
	}, 5*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"late"}, got)
}
