package transport_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// rawServer is an HTTP/1.1 server written against the socket, not net/http's: the test decides,
// for each request, whether it is answered, left hanging, or met by closing the connection
// after the whole request was read. net/http's server would never let a test close a
// keep-alive connection at exactly that moment.
type rawServer struct {
	t  *testing.T
	ln net.Listener
	// policy says what to do with the n-th request (from 1) of a connection.
	policy func(n int) rawAction

	requests atomic.Int64 // complete requests read, over every connection
	conns    atomic.Int64 // connections accepted

	mu     sync.Mutex
	open   []net.Conn
	got    []rawRequest
	closed bool
	wg     sync.WaitGroup
}

type rawAction int

const (
	answer    rawAction = iota // 201 with {"id":"obj-N"}, keep-alive
	closeConn                  // close the socket without a byte of answer
	hang                       // never answer; the connection stays open until the test ends
)

// rawRequest is what the server read.
type rawRequest struct {
	Method, Target string
	Header         map[string]string // lower-case names
	Body           []byte
}

func newRawServer(t *testing.T, policy func(n int) rawAction) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{t: t, ln: ln, policy: policy}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

// newSilentServer accepts connections and never reads a byte from them.
func newSilentServer(t *testing.T) *rawServer {
	return newRawServer(t, nil)
}

func (s *rawServer) URL() string { return "http://" + s.ln.Addr().String() + "/hook" }

// Requests is how many complete requests the server read.
func (s *rawServer) Requests() int64 { return s.requests.Load() }

// Conns is how many connections the server accepted.
func (s *rawServer) Conns() int64 { return s.conns.Load() }

// Got returns the requests read so far, in order.
func (s *rawServer) Got() []rawRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]rawRequest(nil), s.got...)
}

func (s *rawServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.conns.Add(1)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.open = append(s.open, c)
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *rawServer) serve(c net.Conn) {
	defer s.wg.Done()
	if s.policy == nil {
		return // silent: the connection stays open and unread until close
	}
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		req, err := readRawRequest(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "connection reset") {
				s.t.Errorf("raw server: %v", err)
			}
			_ = c.Close()
			return
		}
		s.mu.Lock()
		s.got = append(s.got, req)
		s.mu.Unlock()
		count := s.requests.Add(1)
		switch s.policy(n) {
		case answer:
			body := fmt.Sprintf(`{"id":"obj-%d"}`, count)
			if _, err := fmt.Fprintf(c, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body); err != nil {
				_ = c.Close()
				return
			}
		case closeConn:
			_ = c.Close()
			return
		case hang:
			return // the connection stays open until close
		}
	}
}

// readRawRequest reads one HTTP/1.1 request with a Content-Length body (what Go's client sends
// for a byte slice); anything else is an error.
func readRawRequest(br *bufio.Reader) (rawRequest, error) {
	var req rawRequest
	line, err := br.ReadString('\n')
	if err != nil {
		return req, err
	}
	parts := strings.Fields(line)
	if len(parts) != 3 || parts[2] != "HTTP/1.1" {
		return req, fmt.Errorf("request line %q", line)
	}
	req.Method, req.Target = parts[0], parts[1]
	req.Header = map[string]string{}
	for {
		h, err := br.ReadString('\n')
		if err != nil {
			return req, fmt.Errorf("header: %w", err)
		}
		h = strings.TrimRight(h, "\r\n")
		if h == "" {
			break
		}
		name, value, ok := strings.Cut(h, ":")
		if !ok {
			return req, fmt.Errorf("header line %q", h)
		}
		req.Header[strings.ToLower(name)] = strings.TrimSpace(value)
	}
	if te := req.Header["transfer-encoding"]; te != "" {
		return req, fmt.Errorf("transfer-encoding %q: want a Content-Length body", te)
	}
	if cl := req.Header["content-length"]; cl != "" {
		n, err := strconv.Atoi(cl)
		if err != nil || n < 0 {
			return req, fmt.Errorf("content-length %q", cl)
		}
		req.Body = make([]byte, n)
		if _, err := io.ReadFull(br, req.Body); err != nil {
			return req, fmt.Errorf("body: %w", err)
		}
	}
	return req, nil
}

func (s *rawServer) close() {
	s.mu.Lock()
	s.closed = true
	_ = s.ln.Close()
	for _, c := range s.open {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}
