package transport_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// idAt reads {"id": "..."} from a 2xx body, as an adapter would.
func idAt(body []byte) (string, error) {
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return "", err
	}
	return v.ID, nil
}

// counting returns a handler that counts its requests and answers with status.
func counting(n *atomic.Int64, status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, `{"id":"obj-1"}`)
	}
}

// A 307 or 308 would make net/http send the body again to the Location: the transport returns
// the redirect as it is, the target never sees a request, and the outcome is unknown (the
// first server may have acted before redirecting).
func TestRedirectsAreNeverFollowed(t *testing.T) {
	var elsewhere atomic.Int64
	target := httptest.NewServer(counting(&elsewhere, http.StatusCreated))
	t.Cleanup(target.Close)
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var here atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				here.Add(1)
				http.Redirect(w, r, target.URL+"/elsewhere", status)
			}))
			t.Cleanup(srv.Close)
			c := transport.New(transport.Config{})
			t.Cleanup(c.CloseIdle)

			ex := c.Do(testContext(t), http.MethodPost, srv.URL, keyHeader("dk1:r"), []byte(`{"n":1}`))
			require.NoError(t, ex.Err)
			require.Equal(t, status, ex.Status)
			require.EqualValues(t, 1, here.Load())
			require.Zero(t, elsewhere.Load(), "the redirect target saw a request")

			out := transport.Classify(ex, transport.DefaultDefinitive(), idAt)
			require.Equal(t, platform.Unknown, out.Result)
			require.Equal(t, platform.ReasonSendUnknown, out.Reason)
			require.Equal(t, string(transport.CaseRedirect), out.Detail["case"])
		})
	}
}

// HTTP/2 retries streams on its own (GOAWAY, REFUSED_STREAM, dead connections), for any method:
// the transport speaks HTTP/1.1 to a server that offers HTTP/2, even when the TLS configuration
// it is given asks for h2.
func TestHTTP2IsNeverSpoken(t *testing.T) {
	var proto atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(r.Proto)
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprint(w, `{"id":"obj-1"}`)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())

	// The control: this server does speak HTTP/2 to a client that asks, so the checks below
	// can fail.
	resp, err := srv.Client().Post(srv.URL, "application/json", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, "HTTP/2.0", proto.Load())

	for name, cfg := range map[string]*tls.Config{
		"the server's roots":             {RootCAs: pool},
		"a configuration that offers h2": {RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}},
	} {
		t.Run(name, func(t *testing.T) {
			proto.Store("")
			c := transport.New(transport.Config{TLS: cfg})
			t.Cleanup(c.CloseIdle)
			ex := c.Do(testContext(t), http.MethodPost, srv.URL, keyHeader("dk1:h"), []byte(`{"n":1}`))
			require.NoError(t, ex.Err)
			require.Equal(t, http.StatusCreated, ex.Status)
			require.Equal(t, "HTTP/1.1", proto.Load(), "the server saw HTTP/2")
		})
	}
}

// Before a connection is held, no byte of the request has left: the outcome is a proven
// not-sent. From the moment one is held, an error is an unknown outcome.
func TestOnlyFailuresBeforeAConnectionProveNothingWasSent(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())

		c := transport.New(transport.Config{})
		ex := c.Do(testContext(t), http.MethodPost, "http://"+addr+"/hook", keyHeader("dk1:a"), []byte(`{}`))
		require.Error(t, ex.Err)
		require.Equal(t, transport.StepNone, ex.Step)
		require.False(t, ex.Connected())
		out := transport.Classify(ex, transport.DefaultDefinitive(), idAt)
		require.Equal(t, platform.NotSent, out.Result)
		require.Equal(t, platform.ReasonConnectionFailed, out.Reason)
	})

	t.Run("deadline passed before sending", func(t *testing.T) {
		srv := newRawServer(t, func(int) rawAction { return answer })
		c := transport.New(transport.Config{})
		t.Cleanup(c.CloseIdle)
		// Warm the pool first: an idle connection at hand must not change the verdict.
		warm := c.Do(testContext(t), http.MethodPost, srv.URL(), keyHeader("dk1:w"), []byte(`{}`))
		require.NoError(t, warm.Err)

		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		ex := c.Do(ctx, http.MethodPost, srv.URL(), keyHeader("dk1:b"), []byte(`{}`))
		require.ErrorIs(t, ex.Err, context.DeadlineExceeded)
		require.Equal(t, transport.StepNone, ex.Step)
		require.EqualValues(t, 1, srv.Requests(), "the expired request reached the server")
		out := transport.Classify(ex, transport.DefaultDefinitive(), idAt)
		require.Equal(t, platform.NotSent, out.Result)
		require.Equal(t, platform.ReasonConnectionFailed, out.Reason)
	})

	t.Run("no answer before the deadline", func(t *testing.T) {
		srv := newRawServer(t, func(int) rawAction { return hang })
		c := transport.New(transport.Config{})
		t.Cleanup(c.CloseIdle)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		ex := c.Do(ctx, http.MethodPost, srv.URL(), keyHeader("dk1:c"), []byte(`{"n":1}`))
		require.ErrorIs(t, ex.Err, context.DeadlineExceeded)
		require.True(t, ex.Connected())
		require.Equal(t, transport.StepWroteRequest, ex.Step)
		require.EqualValues(t, 1, srv.Requests())
		out := transport.Classify(ex, transport.DefaultDefinitive(), idAt)
		require.Equal(t, platform.Unknown, out.Result)
		require.Equal(t, platform.ReasonSendUnknown, out.Reason)
		require.Equal(t, string(transport.StepWroteRequest), out.Detail["step"])
	})
}

// A platform that stops reading cannot hold a send past its deadline: the body's writes stop
// at the deadline and Do returns an unknown outcome (some of the body may have left).
func TestAWriteThatCannotProceedEndsAtTheDeadline(t *testing.T) {
	srv := newSilentServer(t)
	c := transport.New(transport.Config{})
	t.Cleanup(c.CloseIdle)
	body := make([]byte, 64<<20) // far more than the socket buffers hold
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()

	done := make(chan transport.Exchange, 1)
	go func() { done <- c.Do(ctx, http.MethodPost, srv.URL(), keyHeader("dk1:w"), body) }()
	var ex transport.Exchange
	select {
	case ex = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Do is still writing long after its deadline")
	}
	require.Error(t, ex.Err)
	require.True(t, ex.Connected())
	require.NotEqual(t, transport.StepWroteRequest, ex.Step, "the whole body was written, so the write was never blocked")
	out := transport.Classify(ex, transport.DefaultDefinitive(), idAt)
	require.Equal(t, platform.Unknown, out.Result)
	require.Equal(t, platform.ReasonSendUnknown, out.Reason)
}

// net/http treats a bodiless request with an Idempotency-Key as replayable whatever GetBody
// says, so the transport refuses to send one: nothing reaches the server.
func TestABodilessSendIsRefused(t *testing.T) {
	srv := newRawServer(t, func(int) rawAction { return answer })
	c := transport.New(transport.Config{})
	t.Cleanup(c.CloseIdle)
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		for _, body := range [][]byte{nil, {}} {
			ex := c.Do(testContext(t), method, srv.URL(), keyHeader("dk1:e"), body)
			require.ErrorContains(t, ex.Err, "without a body", "%s %v", method, body)
			require.Equal(t, transport.StepNone, ex.Step)
		}
	}
	require.Zero(t, c.Requests())
	require.Zero(t, srv.Conns(), "a refused request opened a connection")

	// A read carries no body and is allowed.
	ex := c.Do(testContext(t), http.MethodGet, srv.URL(), nil, nil)
	require.NoError(t, ex.Err)
	require.Equal(t, http.StatusCreated, ex.Status)
	require.EqualValues(t, 1, srv.Requests())
}

// The response body is read up to the configured limit, and no further.
func TestTheResponseBodyIsBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 10_000))
	}))
	t.Cleanup(srv.Close)
	c := transport.New(transport.Config{MaxResponseBytes: 100})
	t.Cleanup(c.CloseIdle)
	ex := c.Do(testContext(t), http.MethodPost, srv.URL, keyHeader("dk1:l"), []byte(`{}`))
	require.NoError(t, ex.Err)
	require.Len(t, ex.Body, 100)
	out := transport.Classify(ex, transport.DefaultDefinitive(), idAt)
	require.Equal(t, platform.Unknown, out.Result, "a truncated body names no object")
}

func TestExchangeErrorsAreNotWrappedAway(t *testing.T) {
	// Do keeps net/http's error, so callers can match context errors with errors.Is.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := transport.New(transport.Config{})
	ex := c.Do(ctx, http.MethodPost, "http://127.0.0.1:1/", keyHeader("dk1:x"), []byte(`{}`))
	require.True(t, errors.Is(ex.Err, context.Canceled), "%v", ex.Err)
	require.Equal(t, transport.StepNone, ex.Step)
}
