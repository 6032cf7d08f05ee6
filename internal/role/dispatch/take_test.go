package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// A burst of work (ingest publishes the work items of its batch together) that arrives while
// every pipeline waits for work is taken as one batch, not shared between the pipelines: each
// share would pay the ledger's cost per batch. The pipeline that waited takes what comes next.
func TestABurstOfWorkIsOneBatchWhateverThePipelinesWaitingForIt(t *testing.T) {
	t.Parallel()
	const pipelines, burst = 4, 17
	// A linger the burst surely arrives within, on any machine.
	d := &Dispatcher{cfg: Config{Batch: 128, Linger: time.Second}, slots: make(chan struct{}, 1000)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs := make(chan jetstream.Msg, 2*burst)
	batches := make(chan int, pipelines)
	for range pipelines {
		go func() { batches <- len(d.take(ctx, msgs)) }()
	}
	// Every pipeline waits for work before the burst: a receiver parked on the channel is
	// handed a message as it is sent.
	time.Sleep(100 * time.Millisecond)
	for range burst {
		msgs <- nil // take holds messages without looking at them
	}
	require.Equal(t, burst, <-batches, "the burst is one batch")

	msgs <- nil
	require.Equal(t, 1, <-batches, "the next work goes to a pipeline that waited")
	cancel()
	for range pipelines - 2 {
		require.Zero(t, <-batches, "the others stop with nothing once the dispatcher stops")
	}
}
