package matrixlane

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the Proxy does to one send (a PUT .../send/...).
type Fault string

const (
	// Forward relays the send and its answer: the proxy is transparent.
	Forward Fault = ""
	// DropBeforeRead closes the client's connection before reading the send: Dendrite sees
	// nothing, the client's bytes had left.
	DropBeforeRead Fault = "drop_before_read"
	// DropAfterCommit forwards the whole send, reads Dendrite's whole answer (the event is
	// stored by then) and closes the client's connection without relaying a byte of it.
	DropAfterCommit Fault = "drop_after_commit"
	// ErrorAfterCommit forwards the send and answers 500 instead of Dendrite's answer.
	ErrorAfterCommit Fault = "error_after_commit"
	// SuccessWithoutID forwards the send and answers 200 {} instead of Dendrite's answer.
	SuccessWithoutID Fault = "success_without_id"
	// Slow holds the send for SlowBy, then forwards it whether or not the client is still there
	// (Dendrite stores it) and relays the answer.
	Slow Fault = "slow"
	// RateLimit answers 429 M_LIMIT_EXCEEDED with Retry-After, as a rate limiter in front of the
	// homeserver does; nothing is forwarded.
	RateLimit Fault = "rate_limit"
	// BadToken forwards the send with another access token: Dendrite itself refuses it (401
	// M_UNKNOWN_TOKEN) and stores nothing.
	BadToken Fault = "bad_token"
	// Conflict answers 409 itself, a status the adapter does not declare definitive; nothing
	// is forwarded.
	Conflict Fault = "conflict"
	// Redirect answers 307 to the same send with "?again=1": a client that followed it would
	// send again through the proxy, and be counted.
	Redirect Fault = "redirect"
)

// Proxy is an HTTP proxy in front of Dendrite. It forwards every request and meets a send with
// the fault DropNext set, else, with probability Rate (seeded), with DropAfterCommit. For every
// send that Dendrite stored it waits, when Visible is set, until the event reads back from
// Dendrite before it answers the client, so that a platform-side read made after the answer
// sees it (Dendrite answers a send once its roomserver stored the event and serves reads a
// moment later).
type Proxy struct {
	srv    *httptest.Server
	target string
	client *http.Client

	// SlowBy is how long a Slow send is held.
	SlowBy time.Duration
	// Visible waits until the event the send stored reads back (nil: no wait).
	Visible func(eventID string)

	mu    sync.Mutex
	next  Fault
	rate  float64
	rng   *rand.Rand
	sends [][]byte // the body of every send that reached the proxy (nil: dropped before reading)

	requests  atomic.Int64 // every request that reached the proxy
	forwarded atomic.Int64 // sends forwarded to Dendrite
	dropped   atomic.Int64 // sends whose answer the proxy lost or replaced
	down      atomic.Bool
}

// NewProxy listens on loopback and forwards to target (Dendrite's base URL); rate is the
// probability that a send meets DropAfterCommit, drawn from seed.
func NewProxy(target string, rate float64, seed uint64) *Proxy {
	p := &Proxy{target: strings.TrimRight(target, "/"), rate: rate, rng: rand.New(rand.NewPCG(seed, 1)),
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// URL is the proxy's base URL: the homeserver an account is configured with.
func (p *Proxy) URL() string { return p.srv.URL }

// Close stops the proxy: every later connection is refused.
func (p *Proxy) Close() {
	if p.down.CompareAndSwap(false, true) {
		p.srv.CloseClientConnections()
		p.srv.Close()
	}
}

// DropNext makes the next send meet f; the one after it is drawn again.
func (p *Proxy) DropNext(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = f
}

// Sends are the bodies of the sends that reached the proxy, in arrival order (nil for one
// dropped before it was read).
func (p *Proxy) Sends() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.sends...)
}

// Requests is how many requests of any kind reached the proxy.
func (p *Proxy) Requests() int { return int(p.requests.Load()) }

// Forwarded is how many sends reached Dendrite through the proxy.
func (p *Proxy) Forwarded() int64 { return p.forwarded.Load() }

// Dropped is how many sends' answers the proxy lost or replaced.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

func (p *Proxy) take() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.next
	p.next = Forward
	if f == Forward && p.rate > 0 && p.rng.Float64() < p.rate {
		f = DropAfterCommit
	}
	return f
}

func isSend(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/send/")
}

func hangUp(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		_ = conn.Close()
	}
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	if !isSend(r) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			hangUp(w)
			return
		}
		p.relay(w, r, body, "")
		return
	}
	f := p.take()
	if f == DropBeforeRead {
		p.mu.Lock()
		p.sends = append(p.sends, nil)
		p.mu.Unlock()
		p.dropped.Add(1)
		hangUp(w)
		return
	}
	body, err := io.ReadAll(r.Body)
	p.mu.Lock()
	p.sends = append(p.sends, body)
	p.mu.Unlock()
	if err != nil {
		hangUp(w)
		return
	}
	switch f {
	case RateLimit:
		p.dropped.Add(1)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"errcode": "M_LIMIT_EXCEEDED", "error": "Too many requests", "retry_after_ms": 1000})
		return
	case Conflict:
		p.dropped.Add(1)
		writeJSON(w, http.StatusConflict, map[string]any{"errcode": "M_UNKNOWN", "error": "conflict"})
		return
	case Redirect:
		p.dropped.Add(1)
		http.Redirect(w, r, r.URL.Path+"?again=1", http.StatusTemporaryRedirect)
		return
	case Slow:
		time.Sleep(p.SlowBy)
	}
	token := ""
	if f == BadToken {
		token = "not-a-token-of-this-server"
	}
	status, header, answer, err := p.forward(r, body, token)
	if err != nil {
		hangUp(w)
		return
	}
	p.forwarded.Add(1)
	if status == http.StatusOK && p.Visible != nil {
		var sent struct {
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(answer, &sent) == nil && sent.EventID != "" {
			p.Visible(sent.EventID)
		}
	}
	switch f {
	case DropAfterCommit:
		p.dropped.Add(1)
		hangUp(w)
	case ErrorAfterCommit:
		p.dropped.Add(1)
		writeJSON(w, http.StatusInternalServerError, map[string]any{"errcode": "M_UNKNOWN", "error": "Internal Server Error"})
	case SuccessWithoutID:
		p.dropped.Add(1)
		writeJSON(w, http.StatusOK, map[string]any{})
	default:
		for k, v := range header {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		_, _ = w.Write(answer)
	}
}

// relay forwards a request that is no send and relays its answer.
func (p *Proxy) relay(w http.ResponseWriter, r *http.Request, body []byte, token string) {
	status, header, answer, err := p.forward(r, body, token)
	if err != nil {
		hangUp(w)
		return
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(answer)
}

// forward makes r's request to Dendrite (with token as Bearer when set) and reads the whole
// answer. It goes on when the client leaves: a server finishes what it received.
func (p *Proxy) forward(r *http.Request, body []byte, token string) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Minute)
	defer cancel()
	var rd io.Reader
	if len(body) > 0 || r.Method == http.MethodPut || r.Method == http.MethodPost {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, p.target+r.URL.RequestURI(), rd)
	if err != nil {
		return 0, nil, nil, err
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, nil, err
	}
	resp.Header.Del("Content-Length")
	return resp.StatusCode, resp.Header, answer, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
