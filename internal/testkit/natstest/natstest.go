// Package natstest runs an embedded NATS server with JetStream for one test: its own port, its
// own store in t.TempDir(), shut down when the test ends. Nothing is shared between tests, so
// they may run in parallel.
package natstest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
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
	s := &Server{opts: server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
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
