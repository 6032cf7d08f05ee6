package streams_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/pkg/events"
)

func connect(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc := natstest.New(t).Connect(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

func TestEnsureCreatesEveryStreamAndIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc, js := connect(t)
	require.NoError(t, streams.Ensure(ctx, nc, js, streams.Config{}))
	require.NoError(t, streams.Ensure(ctx, nc, js, streams.Config{}), "a second start-up changes nothing")
	for _, want := range streams.Configs(streams.Config{}) {
		s, err := js.Stream(ctx, want.Name)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		require.Equal(t, want.Subjects, info.Config.Subjects)
		require.Equal(t, want.Retention, info.Config.Retention)
		require.Equal(t, jetstream.FileStorage, info.Config.Storage)
		require.Equal(t, 10*time.Minute, info.Config.Duplicates)
	}
	s, err := js.Stream(ctx, events.DispatchStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, jetstream.WorkQueuePolicy, info.Config.Retention)
}

func TestEnsureOnlyTheNamedStreams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc, js := connect(t)
	require.NoError(t, streams.Ensure(ctx, nc, js, streams.Config{}, events.IntentsStream))
	_, err := js.Stream(ctx, events.IntentsStream)
	require.NoError(t, err)
	_, err = js.Stream(ctx, events.EventsStream)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
}

// A stream an operator made differently is reported, every difference named, and left as it is.
func TestAnIncompatibleStreamIsAnErrorNotAChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc, js := connect(t)
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: events.EventsStream, Subjects: []string{"atmost.event.>"}, Storage: jetstream.MemoryStorage,
		Duplicates: time.Minute,
	})
	require.NoError(t, err)
	err = streams.Ensure(ctx, nc, js, streams.Config{}, events.EventsStream)
	require.ErrorIs(t, err, streams.ErrIncompatible)
	require.ErrorContains(t, err, "storage Memory, want File")
	require.ErrorContains(t, err, "duplicate window 1m0s, shorter than the 10m0s atmost needs")
	s, err := js.Stream(ctx, events.EventsStream)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, jetstream.MemoryStorage, info.Config.Storage, "left as the operator made it")

	// A longer window or age than atmost needs is fine.
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: events.RejectsStream, Subjects: []string{"atmost.rejected.>"}, Storage: jetstream.FileStorage,
		Duplicates: time.Hour, MaxAge: 365 * 24 * time.Hour,
	})
	require.NoError(t, err)
	require.NoError(t, streams.Ensure(ctx, nc, js, streams.Config{}, events.RejectsStream))
}

// A stream that acknowledges messages before it writes them (async persistence) is refused: an
// acknowledged event or intent would be lost with the server.
func TestAStreamThatAcknowledgesBeforeItWritesIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nc, js := connect(t)
	want := streams.Configs(streams.Config{})[0]
	want.PersistMode = jetstream.AsyncPersistMode
	_, err := js.CreateStream(ctx, want)
	require.NoError(t, err)
	err = streams.Ensure(ctx, nc, js, streams.Config{}, want.Name)
	require.ErrorIs(t, err, streams.ErrIncompatible)
	require.ErrorContains(t, err, "persist mode Async, want Default")
}

func TestServerVersionsAreComparedNumerically(t *testing.T) {
	for have, ok := range map[string]bool{
		"2.10.0": true, "v2.10.4": true, "2.15.2": true, "3.0.0": true, "2.10.0-beta.1": true,
		"2.9.0": false, "2.9.10": false, "2.9.25": false, "2.8.4": false, "1.9.9": false, "": false, "2": false, "garbage": false,
	} {
		require.Equal(t, ok, streams.AtLeast(have, streams.MinServerVersion), have)
	}
	require.True(t, streams.AtLeast("2.10.0", "2.9.0"), "10 > 9, not '1' < '9'")
}

// A role connected to a nats-server older than 2.10.0 (the first that takes sync_interval:
// always) stops at start-up with a message naming both versions and why. The server here
// speaks the protocol's handshake and announces 2.9.10 in its INFO, as that release does.
func TestAServerThatCannotSyncAlwaysIsRefusedAtStartUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(conn, `INFO {"server_id":"old","version":"2.9.10","go":"go1.19","host":"127.0.0.1","port":4222,"headers":true,"max_payload":1048576,"proto":1}`+"\r\n")
		lines := bufio.NewScanner(conn)
		for lines.Scan() {
			if lines.Text() == "PING" {
				fmt.Fprint(conn, "PONG\r\n")
			}
		}
	}()
	nc, err := nats.Connect("nats://"+ln.Addr().String(), nats.NoReconnect())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	err = streams.CheckServer(nc)
	require.ErrorIs(t, err, streams.ErrServerTooOld)
	for _, want := range []string{`"2.9.10"`, "2.10.0 or later", "sync_interval: always"} {
		require.ErrorContains(t, err, want)
	}
}
