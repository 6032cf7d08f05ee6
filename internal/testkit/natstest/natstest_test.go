package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/events"
)

func TestJetStreamKeepsMessagesAcrossRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := natstest.New(t)
	js, err := jetstream.New(srv.Connect(t))
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Storage: jetstream.FileStorage})
	require.NoError(t, err)
	ack, err := js.Publish(ctx, "t.one", []byte("hello"), jetstream.WithMsgID("m1"))
	require.NoError(t, err)
	require.False(t, ack.Duplicate)

	url := srv.URL
	srv.Restart(t)
	require.Equal(t, url, srv.URL, "a restarted server keeps its URL")

	js, err = jetstream.New(srv.Connect(t))
	require.NoError(t, err)
	stream, err := js.Stream(ctx, "T")
	require.NoError(t, err)
	msg, err := stream.GetLastMsgForSubject(ctx, "t.one")
	require.NoError(t, err)
	require.Equal(t, "hello", string(msg.Data))
	again, err := js.Publish(ctx, "t.one", []byte("hello"), jetstream.WithMsgID("m1"))
	require.NoError(t, err)
	require.True(t, again.Duplicate, "the duplicate window survives the restart")
}

func TestServersOfParallelTestsAreSeparate(t *testing.T) {
	t.Parallel()
	a, b := natstest.New(t), natstest.New(t)
	require.NotEqual(t, a.URL, b.URL)
}

// Streams leaves a test where a role's start-up leaves it: every stream of atmost in place.
func TestStreamsEnsuresAtmostsStreams(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := natstest.New(t).Streams(t)
	for _, name := range []string{events.IntentsStream, events.EventsStream, events.DispatchStream, events.RejectsStream} {
		_, err := js.Stream(ctx, name)
		require.NoError(t, err, name)
	}
}
