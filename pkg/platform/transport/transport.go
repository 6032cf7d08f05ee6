// Package transport is the HTTP layer every atmost adapter sends through. It sends each request
// exactly once: Go's net/http replays a request on a reused connection when it looks idempotent
// (any request carrying an Idempotency-Key header with a rewindable body does), retries HTTP/2
// streams on its own, and re-sends bodies on 307/308 redirects. Each of those is off here, and
// every exchange is traced (net/http/httptrace) so that an error can be classified by whether a
// connection was held when it happened: before that, no byte left; after, anything may have.
package transport

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"sync/atomic"
	"time"
)

// Config tunes a client. The zero value of every field means its default.
type Config struct {
	// DialTimeout bounds connecting (and the TLS handshake). Default DefaultDialTimeout.
	DialTimeout time.Duration
	// MaxIdleConnsPerHost keeps connections for reuse. Default DefaultMaxIdleConnsPerHost: a dispatcher starts a
	// whole batch of sends at once (128 per pipeline by default, each followed by its
	// read-back), and every connection beyond what the pool keeps is dialled for one request
	// and closed after it; with 64 that was a fresh TCP connection for most sends.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes a kept connection after this long unused. It should be shorter
	// than the platform's own keep-alive timeout: a send on a connection the server already
	// closed fails after its bytes left, which is (correctly) an unknown outcome that no
	// fault caused. Default DefaultIdleConnTimeout.
	IdleConnTimeout time.Duration
	// MaxResponseBytes bounds how much of a response body is read. Default DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// TLS configures HTTPS; nil means Go's defaults.
	TLS *tls.Config
}

// The defaults of the configuration's fields (the zero value of a field means its default).
const (
	DefaultDialTimeout         = 5 * time.Second
	DefaultIdleConnTimeout     = 30 * time.Second
	DefaultMaxIdleConnsPerHost = 256
	DefaultMaxResponseBytes    = 1 << 20
)

func (c Config) withDefaults() Config {
	c.DialTimeout = cmp.Or(c.DialTimeout, DefaultDialTimeout)
	c.IdleConnTimeout = cmp.Or(c.IdleConnTimeout, DefaultIdleConnTimeout)
	c.MaxIdleConnsPerHost = cmp.Or(c.MaxIdleConnsPerHost, DefaultMaxIdleConnsPerHost)
	c.MaxResponseBytes = cmp.Or(c.MaxResponseBytes, DefaultMaxResponseBytes)
	return c
}

// Client sends requests once each. It is safe for concurrent use.
type Client struct {
	http     *http.Client
	maxBytes int64
	sent     atomic.Uint64
}

// New returns a client with every automatic retry off.
func New(cfg Config) *Client {
	cfg = cfg.withDefaults()
	dialer := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSClientConfig:     http1TLS(cfg.TLS),
		TLSHandshakeTimeout: cfg.DialTimeout,
		MaxIdleConns:        4 * cfg.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost: cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:     cfg.IdleConnTimeout,
		// HTTP/2 retries streams on GOAWAY, REFUSED_STREAM and unusable connections by itself,
		// for any method: speak HTTP/1.1 only.
		ForceAttemptHTTP2: false,
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
		Protocols:         http1Only(),
	}
	return &Client{
		http: &http.Client{
			Transport: tr,
			// A 307 or 308 would make the client send the body again, elsewhere: never follow.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		maxBytes: cfg.MaxResponseBytes,
	}
}

func http1Only() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return p
}

// http1TLS returns a copy of cfg that offers only HTTP/1.1 in ALPN. A configuration that offers
// h2 (one copied from another client, say) would let the server choose HTTP/2 during the
// handshake, and the transport, which has no HTTP/2 implementation, would then write HTTP/1.1
// on an HTTP/2 connection: every send would fail after the connection was held, an unknown
// outcome for a request the platform never parsed.
func http1TLS(cfg *tls.Config) *tls.Config {
	if cfg == nil {
		cfg = &tls.Config{}
	} else {
		cfg = cfg.Clone()
	}
	cfg.NextProtos = []string{"http/1.1"}
	return cfg
}

// Requests returns how many requests this client let start (one per call to Do that reached
// the network layer).
func (c *Client) Requests() uint64 { return c.sent.Load() }

// CloseIdle closes the client's idle connections.
func (c *Client) CloseIdle() { c.http.CloseIdleConnections() }

// Step is how far an exchange got.
type Step string

const (
	StepNone         Step = "none"          // no connection was obtained: no byte of this request left
	StepConnected    Step = "connected"     // a connection was held: bytes may have left from here on
	StepWroteHeaders Step = "wrote_headers" // the headers were handed to the connection
	StepWroteRequest Step = "wrote_request" // the whole request was handed to the connection
	StepResponse     Step = "response"      // a response status line arrived
)

// stepOrder ranks the steps: the trace callbacks run on net/http's goroutines and may arrive
// out of order (a server can answer before it read the whole body), so a step only moves on.
var stepOrder = []Step{StepNone, StepConnected, StepWroteHeaders, StepWroteRequest, StepResponse}

type stepTracker struct{ rank atomic.Int32 }

func (s *stepTracker) advance(to Step) {
	r := int32(slices.Index(stepOrder, to))
	for {
		cur := s.rank.Load()
		if cur >= r || s.rank.CompareAndSwap(cur, r) {
			return
		}
	}
}

func (s *stepTracker) load() Step { return stepOrder[s.rank.Load()] }

// Exchange is the trace of one request.
type Exchange struct {
	Step Step
	// Reused: the connection had carried an earlier request.
	Reused bool
	Status int
	Header http.Header
	// Body is the response body, up to the client's limit.
	Body []byte
	// Err is the error of the exchange, if any (reading the body included).
	Err error
	// Elapsed is how long the exchange took.
	Elapsed time.Duration
}

// Connected reports whether the exchange held a connection: from that moment on, an error
// means the request may have reached the platform.
func (e Exchange) Connected() bool { return e.Step != StepNone }

// Do sends one request exactly once and reports how far it got. No byte of it is written
// after ctx's deadline: the connection's write deadline is set to it as the connection is
// obtained. header is sent as given, credentials included (the adapter adds them here, never
// to the prepared request), and must not change until Do returns. A request other than GET or
// HEAD must carry a body (see newRequest); Do refuses one without, at StepNone.
func (c *Client) Do(ctx context.Context, method, url string, header http.Header, body []byte) Exchange {
	start := time.Now()
	var ex Exchange
	ex.Step = StepNone
	var reached stepTracker
	var reused atomic.Bool
	deadline, hasDeadline := ctx.Deadline()
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			reused.Store(info.Reused)
			// Bound the kernel-level writes of this request by its deadline; the zero time clears
			// a deadline an earlier request on the same connection set.
			var d time.Time
			if hasDeadline {
				d = deadline
			}
			_ = info.Conn.SetWriteDeadline(d)
			reached.advance(StepConnected)
		},
		WroteHeaders: func() { reached.advance(StepWroteHeaders) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			// net/http reports the end of the write here, failed writes included: only a write
			// that succeeded means the whole request was handed over.
			if info.Err == nil {
				reached.advance(StepWroteRequest)
			}
		},
		GotFirstResponseByte: func() { reached.advance(StepResponse) },
	}
	req, err := newRequest(httptrace.WithClientTrace(ctx, trace), method, url, header, body)
	if err != nil {
		ex.Err = err
		return ex
	}
	c.sent.Add(1)
	resp, err := c.http.Do(req)
	ex.Step = reached.load()
	ex.Reused = reused.Load()
	if err != nil {
		ex.Err = err
		ex.Elapsed = time.Since(start)
		return ex
	}
	defer resp.Body.Close()
	ex.Step = StepResponse
	ex.Status = resp.StatusCode
	ex.Header = resp.Header
	ex.Body, ex.Err = io.ReadAll(io.LimitReader(resp.Body, c.maxBytes))
	ex.Elapsed = time.Since(start)
	return ex
}

// canonical reports whether every name in h is in its canonical form
// (textproto.CanonicalMIMEHeaderKey), as http.Header's own methods write them.
func canonical(h http.Header) bool {
	for name := range h {
		if textproto.CanonicalMIMEHeaderKey(name) != name {
			return false
		}
	}
	return true
}

// newRequest builds a request whose body cannot be replayed: net/http retries a request on a
// reused connection only when it can rewind the body (GetBody set) and the request looks
// idempotent, which an Idempotency-Key header makes it. With GetBody cleared no retry is
// possible, whatever the headers say.
func newRequest(ctx context.Context, method, url string, header http.Header, body []byte) (*http.Request, error) {
	if method != http.MethodGet && method != http.MethodHead && len(body) == 0 {
		// net/http treats a bodiless request carrying an Idempotency-Key as replayable
		// whatever GetBody says, so a send must carry a body.
		return nil, fmt.Errorf("transport: a %s without a body could be replayed by net/http; refusing to send it", method)
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, fmt.Errorf("transport: request: %w", err)
	}
	switch {
	case header == nil: // the empty header NewRequestWithContext made stays
	case canonical(header):
		// net/http's client reads a request's header and never changes it, so the caller's
		// map is the request's, not copied name by name for every send.
		req.Header = header
	default:
		// Copied name by name, each made canonical: net/http leaves out a Host or a
		// Content-Length of the header, as it writes its own, only under those names, and a
		// "content-length" sent beside them could make the server read another request out
		// of the body.
		for name, values := range header {
			for _, v := range values {
				req.Header.Add(name, v)
			}
		}
	}
	if body != nil {
		req.GetBody = nil // no replay (the mutation list names this line)
	}
	return req, nil
}
