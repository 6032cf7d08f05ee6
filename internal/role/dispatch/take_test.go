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
	// A gap the burst's items surely arrive within, one after the other, on any machine.
	d := &Dispatcher{cfg: Config{Batch: 128, Linger: time.Second, gap: time.Second}, slots: make(chan struct{}, 1000)}
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

// A batch being taken waits for the rest of its burst, and no longer: once no work item
// arrived within the gap after the latest, it goes, rather than wait out the linger behind a
// burst that is over (an hour here). The next work is taken by the next take.
func TestATakeEndsWhenItsBurstIsOver(t *testing.T) {
	t.Parallel()
	const burst = 5
	d := &Dispatcher{cfg: Config{Batch: 128, Linger: time.Hour, gap: 200 * time.Millisecond}, slots: make(chan struct{}, 1000)}
	msgs := make(chan jetstream.Msg, 2*burst)
	batch := takeOne(t, d, msgs)
	for range burst {
		msgs <- nil
	}
	require.Equal(t, burst, <-batch, "the burst is one batch")
	batch = takeOne(t, d, msgs)
	msgs <- nil
	require.Equal(t, 1, <-batch)
}

// A burst whose items arrive one by one, each well within the gap of the one before, is one
// batch, though it lasts longer than the gap: the gap counts from the latest item, not the
// first.
func TestATakeWaitsForABurstArrivingItemByItem(t *testing.T) {
	t.Parallel()
	const burst = 5
	d := &Dispatcher{cfg: Config{Batch: 128, Linger: time.Hour, gap: time.Second}, slots: make(chan struct{}, 1000)}
	msgs := make(chan jetstream.Msg, burst)
	batch := takeOne(t, d, msgs)
	for i := range burst {
		if i > 0 {
			time.Sleep(300 * time.Millisecond) // 1.2 s in all
		}
		msgs <- nil
	}
	require.Equal(t, burst, <-batch, "the burst is one batch")
}

// takeOne takes one batch from msgs with d, and sends its size; the test fails when the take
// has not ended within a minute, waiting out a linger of an hour behind a burst that was over.
func takeOne(t *testing.T, d *Dispatcher, msgs chan jetstream.Msg) <-chan int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	taken := make(chan int, 1)
	go func() { taken <- len(d.take(ctx, msgs)) }()
	out := make(chan int, 1)
	go func() {
		select {
		case n := <-taken:
			out <- n
		case <-time.After(time.Minute):
			t.Error("the take waited out its linger behind a burst that was over")
			out <- -1
		}
	}()
	return out
}

// A read-back group waits for the sends still on their way to it, and no longer once the last
// of them ended without a read to hand it (a failed send, an adapter that reads alone): the
// wait is woken then, not left to run out its linger (an hour here).
func TestAReadBackGroupStopsWaitingWhenNothingMoreIsOnItsWay(t *testing.T) {
	t.Parallel()
	d := &Dispatcher{cfg: Config{Linger: time.Hour}, reads: make(chan *read, 4), readsDue: make(chan struct{}, 1)}
	d.underway.Add(3)
	took := func(*read) { d.underway.Add(-1) }
	got := make(chan []*read, 1)
	go func() { got <- gather(&read{}, d.reads, maxReadGroup, &d.underway, d.readsDue, d.cfg.Linger, took) }()
	// Each step once the group surely waits (a pause, as in the test above).
	time.Sleep(100 * time.Millisecond)
	d.reads <- &read{} // the second joins the first
	time.Sleep(100 * time.Millisecond)
	d.offTheReads() // the third send failed: nothing more is on its way
	select {
	case group := <-got:
		require.Len(t, group, 2)
	case <-time.After(time.Minute):
		t.Fatal("the group waited for a read that was not on its way")
	}
	require.Zero(t, d.underway.Load())
}
