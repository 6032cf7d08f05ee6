package blueskylane

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what a FaultProxy does to one createRecord.
type Fault string

const (
	// Pass relays the createRecord and its answer.
	Pass Fault = ""
	// FaultDropBeforeRead closes the client's connection before reading the createRecord: the
	// PDS sees nothing, the client's bytes had left.
	FaultDropBeforeRead Fault = "drop_before_read"
	// FaultDropAfterCommit forwards the createRecord, reads the PDS's whole answer (the record
	// is committed by then) and closes the client's connection without relaying a byte of it.
	FaultDropAfterCommit Fault = "drop_after_commit"
	// FaultErrorAfterCommit forwards the createRecord and answers 500 instead of the PDS.
	FaultErrorAfterCommit Fault = "error_after_commit"
	// FaultSuccessWithoutID forwards the createRecord and answers 200 {} instead of the PDS.
	FaultSuccessWithoutID Fault = "success_without_id"
	// FaultSlow holds the createRecord for SlowBy, then forwards it whether or not the client
	// is still there (the PDS commits it) and relays the answer.
	FaultSlow Fault = "slow"
	// FaultRateLimit answers 429 RateLimitExceeded with Retry-After, as a rate limiter in
	// front of the PDS does; nothing is forwarded.
	FaultRateLimit Fault = "rate_limit"
	// FaultBadToken forwards the createRecord with another access token: the PDS itself
	// refuses it and creates nothing.
	FaultBadToken Fault = "bad_token"
	// FaultConflict answers 409 itself, a status the adapter does not declare definitive;
	// nothing is forwarded.
	FaultConflict Fault = "conflict"
	// FaultRedirect answers 307 to the same createRecord with "?again=1": a client that
	// followed it would create again through the proxy, and be counted.
	FaultRedirect Fault = "redirect"
)

// FaultProxy is an HTTP proxy in front of a PDS that forwards every request and meets the next
// createRecord with the fault Next set: the conformance suite's platform. It records the body
// of every createRecord that reached it and every access token it saw.
type FaultProxy struct {
	srv    *httptest.Server
	target string
	client *http.Client

	// SlowBy is how long a FaultSlow createRecord is held.
	SlowBy time.Duration

	mu      sync.Mutex
	next    Fault
	creates [][]byte // nil: dropped before reading
	tokens  []string // the bearer tokens of the requests, the sessions' answers' tokens

	requests atomic.Int64
	down     atomic.Bool
}

// NewFaultProxy listens on loopback and forwards to target, the PDS's base URL.
func NewFaultProxy(target string) *FaultProxy {
	p := &FaultProxy{target: strings.TrimRight(target, "/"),
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// URL is the proxy's base URL: the PDS an account is configured with.
func (p *FaultProxy) URL() string { return p.srv.URL }

// Close stops the proxy: every later connection is refused.
func (p *FaultProxy) Close() {
	if p.down.CompareAndSwap(false, true) {
		p.srv.CloseClientConnections()
		p.srv.Close()
	}
}

// Next makes the next createRecord meet f; the ones after it pass.
func (p *FaultProxy) Next(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = f
}

// Creates are the bodies of the createRecords that reached the proxy, in arrival order (nil
// for one dropped before it was read).
func (p *FaultProxy) Creates() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.creates...)
}

// Tokens are the access and refresh tokens the proxy saw.
func (p *FaultProxy) Tokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.tokens...)
}

// Requests is how many requests of any kind reached the proxy.
func (p *FaultProxy) Requests() int { return int(p.requests.Load()) }

func (p *FaultProxy) take() Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.next
	p.next = Pass
	return f
}

func (p *FaultProxy) remember(tokens ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range tokens {
		if t != "" {
			p.tokens = append(p.tokens, t)
		}
	}
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	p.remember(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if r.Method != http.MethodPost || r.URL.Path != createRecordPath {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			hangUp(w)
			return
		}
		status, header, answer, err := p.forward(r, body, "")
		if err != nil {
			hangUp(w)
			return
		}
		var sess struct {
			AccessJwt  string `json:"accessJwt"`
			RefreshJwt string `json:"refreshJwt"`
		}
		if json.Unmarshal(answer, &sess) == nil {
			p.remember(sess.AccessJwt, sess.RefreshJwt)
		}
		relay(w, status, header, answer)
		return
	}
	f := p.take()
	if f == FaultDropBeforeRead {
		p.mu.Lock()
		p.creates = append(p.creates, nil)
		p.mu.Unlock()
		hangUp(w)
		return
	}
	body, err := io.ReadAll(r.Body)
	p.mu.Lock()
	p.creates = append(p.creates, body)
	p.mu.Unlock()
	if err != nil {
		hangUp(w)
		return
	}
	switch f {
	case FaultRateLimit:
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "RateLimitExceeded", "message": "Rate Limit Exceeded"})
		return
	case FaultConflict:
		writeJSON(w, http.StatusConflict, map[string]string{"error": "Conflict", "message": "conflict"})
		return
	case FaultRedirect:
		http.Redirect(w, r, r.URL.Path+"?again=1", http.StatusTemporaryRedirect)
		return
	case FaultSlow:
		time.Sleep(p.SlowBy)
	}
	token := ""
	if f == FaultBadToken {
		token = "not-a-token-of-this-pds"
	}
	status, header, answer, err := p.forward(r, body, token)
	if err != nil {
		hangUp(w)
		return
	}
	switch f {
	case FaultDropAfterCommit:
		hangUp(w)
	case FaultErrorAfterCommit:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "InternalServerError", "message": "Internal Server Error"})
	case FaultSuccessWithoutID:
		writeJSON(w, http.StatusOK, map[string]string{})
	default:
		relay(w, status, header, answer)
	}
}

// forward makes r's request to the PDS (with token as Bearer when set) and reads the whole
// answer. It goes on when the client leaves: a server finishes what it received.
func (p *FaultProxy) forward(r *http.Request, body []byte, token string) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Minute)
	defer cancel()
	var rd io.Reader
	if len(body) > 0 || r.Method == http.MethodPost {
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

func relay(w http.ResponseWriter, status int, header http.Header, answer []byte) {
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(answer)
}

func hangUp(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		_ = conn.Close()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
