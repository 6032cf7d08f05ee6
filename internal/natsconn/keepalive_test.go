package natsconn_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/natsconn"
	"github.com/atmost/atmost/internal/testkit/natstest"
)

// A message worked longer than its consumer's AckWait stays with its worker while KeepAlive
// runs, and is given away again once it stops without an acknowledgement.
func TestKeepAliveHoldsAMessageBeyondItsAckWait(t *testing.T) {
	t.Parallel()
	const ackWait = 400 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nc, err := nats.Connect(natstest.New(t).URL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "WORK", Subjects: []string{"work.>"}})
	require.NoError(t, err)
	consumer, err := js.CreateOrUpdateConsumer(ctx, "WORK", jetstream.ConsumerConfig{Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait})
	require.NoError(t, err)
	next := func(wait time.Duration) jetstream.Msg {
		t.Helper()
		batch, err := consumer.Fetch(1, jetstream.FetchMaxWait(wait))
		require.NoError(t, err)
		for m := range batch.Messages() {
			return m
		}
		require.NoError(t, batch.Error())
		return nil
	}
	for _, subject := range []string{"work.held", "work.released"} {
		_, err = js.Publish(ctx, subject, []byte(subject))
		require.NoError(t, err)
	}

	held := next(time.Second)
	require.NotNil(t, held)
	stopHeld := natsconn.KeepAlive(held, ackWait/3)
	released := next(time.Second)
	require.NotNil(t, released)
	stopReleased := natsconn.KeepAlive(released, ackWait/3)
	stopReleased()
	stopReleased() // a second stop is harmless

	// Five AckWaits: only the message whose keep-alive stopped comes again.
	deadline := time.Now().Add(5 * ackWait)
	var again []string
	for time.Now().Before(deadline) {
		if m := next(max(time.Until(deadline), time.Millisecond)); m != nil {
			again = append(again, m.Subject())
			require.NoError(t, m.Ack())
		}
	}
	require.Equal(t, []string{"work.released"}, again)
	stopHeld()
	require.NoError(t, held.Ack())
	require.Nil(t, next(2*ackWait), "an acknowledged message came again")
}

// reminders is a message that counts its InProgress calls.
type reminders struct {
	jetstream.Msg
	n atomic.Int64
}

func (r *reminders) InProgress() error { r.n.Add(1); return nil }

// Once stop returns, no reminder is sent, however many were sent before or fire at that
// moment.
func TestKeepAliveRemindsUntilStopReturnsAndNeverAfter(t *testing.T) {
	t.Parallel()
	for range 20 {
		m := &reminders{}
		stop := natsconn.KeepAlive(m, time.Millisecond)
		require.Eventually(t, func() bool { return m.n.Load() >= 3 }, 5*time.Second, time.Millisecond)
		stop()
		after := m.n.Load()
		time.Sleep(20 * time.Millisecond)
		require.Equal(t, after, m.n.Load(), "a reminder was sent after stop returned")
		stop()
	}
	require.Panics(t, func() { natsconn.KeepAlive(&reminders{}, 0) })
}
