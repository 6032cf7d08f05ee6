package cli

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// fakeMsg is a message at a stream sequence; only what readStream reads is implemented.
type fakeMsg struct {
	jetstream.Msg
	seq uint64
}

func (m fakeMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: m.seq}}, nil
}
func (m fakeMsg) Data() []byte    { return nil }
func (m fakeMsg) Subject() string { return "atmost.event.pending.acct-1" }

type fakeBatch struct {
	msgs chan jetstream.Msg
	err  error
}

func (b fakeBatch) Messages() <-chan jetstream.Msg { return b.msgs }
func (b fakeBatch) Error() error                   { return b.err }

// fakeConsumer answers each Fetch with the next of its fetches (a list of sequences, or an
// error), and then with empty fetches forever.
type fakeConsumer struct {
	fetches []any
	calls   int
}

func (c *fakeConsumer) Fetch(int, ...jetstream.FetchOpt) (jetstream.MessageBatch, error) {
	c.calls++
	if len(c.fetches) == 0 {
		return batchOf(), nil
	}
	next := c.fetches[0]
	c.fetches = c.fetches[1:]
	if err, ok := next.(error); ok {
		return nil, err
	}
	return batchOf(next.([]uint64)...), nil
}

func batchOf(seqs ...uint64) fakeBatch {
	b := fakeBatch{msgs: make(chan jetstream.Msg, len(seqs))}
	for _, s := range seqs {
		b.msgs <- fakeMsg{seq: s}
	}
	close(b.msgs)
	if len(seqs) == 0 {
		b.err = jetstream.ErrNoMessages
	}
	return b
}

func fastReplay(t *testing.T, patience time.Duration) {
	saved := replayReading
	replayReading.maxWait, replayReading.patience = 10*time.Millisecond, patience
	t.Cleanup(func() { replayReading = saved })
}

// An empty fetch in the middle of the replay (a slow cluster, a leader election, an ordered
// consumer resetting) is not the end: readStream goes on until the stream's last sequence at
// the start was delivered, and hands each sequence over once.
func TestReadStreamReadsPastAnEmptyFetchToTheLastSequence(t *testing.T) {
	fastReplay(t, 5*time.Second)
	cons := &fakeConsumer{fetches: []any{
		[]uint64{1, 2}, []uint64{}, errors.New("leader election"), []uint64{},
		[]uint64{2, 3}, // the ordered consumer reset and delivered 2 again
		[]uint64{4, 5, 6},
	}}
	var got []uint64
	err := readStream(context.Background(), "ATMOST_EVENTS", cons, 5, func(_ jetstream.Msg, meta *jetstream.MsgMetadata) error {
		got = append(got, meta.Sequence.Stream)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3, 4, 5}, got, "every sequence up to the last at the start, once, and no further")
}

// When the last sequence never arrives, the read fails (closed): a partial history decides
// nothing.
func TestReadStreamFailsWhenTheLastSequenceNeverArrives(t *testing.T) {
	fastReplay(t, 200*time.Millisecond)
	cons := &fakeConsumer{fetches: []any{[]uint64{1, 2}}}
	n := 0
	err := readStream(context.Background(), "ATMOST_EVENTS", cons, 3, func(jetstream.Msg, *jetstream.MsgMetadata) error {
		n++
		return nil
	})
	require.ErrorContains(t, err, "the replay is incomplete")
	require.ErrorContains(t, err, "stopped at sequence 2 before the last one at the start, 3")
	require.Equal(t, 2, n)
	require.Greater(t, cons.calls, 2, "empty fetches are retried")

	// Cancelled, it stops at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = readStream(ctx, "ATMOST_EVENTS", &fakeConsumer{}, 3, func(jetstream.Msg, *jetstream.MsgMetadata) error { return nil })
	require.ErrorIs(t, err, context.Canceled)
}
