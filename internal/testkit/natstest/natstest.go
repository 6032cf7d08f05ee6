// Package natstest runs an embedded NATS server with JetStream for one test: its own port, its
// own store in t.TempDir(), shut down when the test ends. Nothing is shared between tests, so
// they may run in parallel.
package natstest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/streams"
)

// Server is an embedded nats-server with JetStream enabled.
type Server struct {
	// URL is the client URL, nats://127.0.0.1:<port>. It stays the same across Restart.
	URL string

	srv  *server.Server
	opts server.Options
}

// New starts a server for t and stops it when t ends.
func New(t testing.TB) *Server {
	t.Helper()
	return start(t, server.Options{})
}

// NewWithConfig starts a server configured by config, nats-server's configuration text
// (accounts, users and their permissions, say), for t. The listen address, the store, logging
// and signals stay the test's: a configuration cannot make two tests share a port or a store.
func NewWithConfig(t testing.TB, config string) *Server {
	t.Helper()
	var opts server.Options
	if err := opts.ProcessConfigString(config); err != nil {
		t.Fatalf("natstest: configuration: %v", err)
	}
	return start(t, opts)
}

func start(t testing.TB, opts server.Options) *Server {
	t.Helper()
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	s := &Server{opts: opts}
	if err := s.start(); err != nil {
		t.Fatalf("natstest: %v", err)
	}
	// Restart must come back on the same port, so clients reconnect to the same URL.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	t.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() error {
	srv, err := server.NewServer(&s.opts)
	if err != nil {
		return fmt.Errorf("configure nats-server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("nats-server not ready for connections after 10s")
	}
	s.srv = srv
	s.URL = srv.ClientURL()
	return nil
}

// Shutdown stops the server and waits until it is down. It is safe to call more than once.
func (s *Server) Shutdown() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart stops the server and starts it again on the same port with the same store, as a
// broker restart would: streams, consumers and stored messages survive it.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Shutdown()
	if err := s.start(); err != nil {
		t.Fatalf("natstest: restart: %v", err)
	}
}

// SubscriptionsMade is how many subscriptions the server's clients have made since it
// started (its sublists' inserts, JetStream's own included): for a test that counts what a
// client asks of the server.
func (s *Server) SubscriptionsMade(t testing.TB) uint64 {
	t.Helper()
	sz, err := s.srv.Subsz(nil)
	if err != nil {
		t.Fatalf("natstest: subscriptions: %v", err)
	}
	return sz.NumInserts
}

// Connect opens a client connection to the server, closed when t ends.
func (s *Server) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.URL, opts...)
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", s.URL, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Streams connects to the server (opts as Connect takes them) and ensures atmost's streams on
// it, as every role does at start-up: what a test that publishes or consumes starts from. The
// connection is the JetStream's Conn.
func (s *Server) Streams(t testing.TB, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc := s.Connect(t, opts...)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	if err := streams.Ensure(context.Background(), nc, js, streams.Config{}); err != nil {
		t.Fatalf("natstest: atmost's streams: %v", err)
	}
	return js
}
