package platformsim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"go.uber.org/zap"
)

// idleTimeout outlives the idle connections atmost's transport keeps (90 s): a platform that
// closes a pooled connection first makes the client's next send on it fail after its bytes
// left, an Unknown outcome that no fault plan asked for.
const idleTimeout = 2 * time.Minute

// shutdownGrace is how long a stopping server waits for requests in hand (a delay fault
// included) before it closes their connections.
const shutdownGrace = 10 * time.Second

// Serve listens on addr ("127.0.0.1:0" picks a free port) and serves the simulator in the
// background until ctx ends. It returns once the listener is bound, with the base URL
// ("http://127.0.0.1:9300") and a channel that is closed when the server has stopped. A bad or
// busy address is an error here, never later.
func (s *Server) Serve(ctx context.Context, addr string) (url string, stopped <-chan struct{}, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("platformsim: listen on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       idleTimeout,
		ErrorLog:          zap.NewStdLog(s.log.Named("http")),
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", zap.Error(err))
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		grace, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if err := srv.Shutdown(grace); err != nil {
			_ = srv.Close()
		}
		<-served
	}()
	return "http://" + ln.Addr().String(), done, nil
}
