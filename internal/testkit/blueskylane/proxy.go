package blueskylane

import (
	"bufio"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// Drop says what the Proxy does with the next createRecord request.
type Drop int

const (
	// Forward relays it and its response: the proxy is transparent.
	Forward Drop = iota
	// DropAfterRequest forwards the whole request to the PDS, waits until the PDS starts its
	// response (the record is committed by then), and closes the client's connection without
	// relaying a byte of it: the client wrote everything and heard nothing.
	DropAfterRequest
	// DropBeforeRequest reads the whole request from the client and closes its connection
	// without forwarding a byte: the client wrote everything, the PDS saw nothing.
	DropBeforeRequest
)

// createRecordPath and uploadBlobPath are the request paths the Proxy watches.
const (
	createRecordPath = "/xrpc/com.atproto.repo.createRecord"
	uploadBlobPath   = "/xrpc/com.atproto.repo.uploadBlob"
)

// Proxy is a TCP proxy in front of a PDS that relays every request byte for byte, and drops a
// connection at a chosen step of one createRecord (DropNext). It counts the createRecord
// requests it forwarded to the PDS.
type Proxy struct {
	ln     net.Listener
	target string

	mu   sync.Mutex
	next Drop
	rate float64    // the share of createRecords dropped after the request (DropRate)
	rng  *rand.Rand // draws them, seeded

	forwarded   atomic.Int64 // createRecord requests the PDS received through the proxy
	uploads     atomic.Int64 // uploadBlob requests the PDS received through the proxy
	dropUploads atomic.Bool  // every uploadBlob meets DropAfterRequest (DropUploads)
	dropped     atomic.Int64 // connections dropped by a plan
}

// NewProxy listens on a loopback port and relays to target (host:port) until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c) // ends when either side closes: the PDS stops at the test's end

		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-accepted
	})
	return p
}

// URL is the proxy's base URL: the PDS URL an account is configured with.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// DropNext makes the next createRecord request meet d; the one after it is forwarded again.
func (p *Proxy) DropNext(d Drop) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = d
}

// DropRate makes every createRecord not planned by DropNext meet DropAfterRequest with
// probability rate, drawn from a generator seeded with seed (the same seed draws the same
// sequence, in the order the requests arrive).
func (p *Proxy) DropRate(rate float64, seed uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rate = rate
	p.rng = rand.New(rand.NewPCG(seed, seed))
}

// DropUploads makes every uploadBlob request meet DropAfterRequest while on is true: the PDS
// stores the blob, the client hears nothing.
func (p *Proxy) DropUploads(on bool) { p.dropUploads.Store(on) }

// Uploads is how many uploadBlob requests reached the PDS through the proxy.
func (p *Proxy) Uploads() int64 { return p.uploads.Load() }

// Forwarded is how many createRecord requests reached the PDS through the proxy.
func (p *Proxy) Forwarded() int64 { return p.forwarded.Load() }

// Dropped is how many connections a drop plan closed.
func (p *Proxy) Dropped() int64 { return p.dropped.Load() }

func (p *Proxy) take() Drop {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.next
	p.next = Forward
	if d == Forward && p.rate > 0 && p.rng.Float64() < p.rate {
		d = DropAfterRequest
	}
	return d
}

// serve relays one client connection. Requests are parsed only to find their ends and paths;
// the bytes forwarded are the bytes the client wrote. An HTTP/1.1 client sends a request on a
// connection only after it read the previous response, so when a createRecord arrives every
// earlier response on the connection has been relayed, and the next response bytes from the
// PDS are the createRecord's.
func (p *Proxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()

	var swallow atomic.Bool // the PDS's next bytes are a dropped request's response
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 && swallow.Load() {
				p.dropped.Add(1)
				_ = client.Close()
				_ = server.Close()
				return
			}
			if n > 0 {
				if _, werr := client.Write(buf[:n]); werr != nil {
					_ = server.Close()
					return
				}
			}
			if err != nil {
				_ = client.Close()
				return
			}
		}
	}()

	rec := &recorder{r: client}
	br := bufio.NewReader(rec)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		raw := rec.take(br.Buffered())
		drop := Forward
		if req.Method == http.MethodPost && req.URL.Path == createRecordPath {
			drop = p.take()
		}
		if req.URL.Path == uploadBlobPath {
			p.uploads.Add(1)
			if p.dropUploads.Load() {
				drop = DropAfterRequest
			}
		}
		switch drop {
		case DropBeforeRequest:
			p.dropped.Add(1)
			return
		case DropAfterRequest:
			swallow.Store(true)
		}
		if req.URL.Path == createRecordPath {
			p.forwarded.Add(1)
		}
		if _, err := server.Write(raw); err != nil {
			return
		}
		if drop == DropAfterRequest {
			// The reader above closes both connections at the response's first byte; wait
			// for the client's side to end rather than read another request.
			_, _ = io.Copy(io.Discard, br)
			return
		}
	}
}

// recorder keeps every byte read through it until take hands them out.
type recorder struct {
	r   io.Reader
	buf []byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

// take returns the bytes read so far except the last unread ones (still buffered by the
// parser: the start of the next request), and forgets them.
func (r *recorder) take(unread int) []byte {
	n := len(r.buf) - unread
	out := append([]byte(nil), r.buf[:n]...)
	r.buf = append(r.buf[:0], r.buf[n:]...)
	return out
}
