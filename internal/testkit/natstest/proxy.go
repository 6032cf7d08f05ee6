package natstest

import (
	"net"
	"strings"
	"sync"
	"testing"
)

// Proxy is a TCP proxy in front of a NATS server that can freeze: every byte held both ways,
// every connection kept open, as a server stopped with SIGSTOP or a host cut off without a
// reset would look to its clients. New connections are accepted and frozen too.
type Proxy struct {
	// URL is the client URL of the proxy, nats://127.0.0.1:<port>.
	URL string

	ln     net.Listener
	target string

	mu     sync.Mutex
	frozen bool
	thawed *sync.Cond
	conns  []net.Conn
}

// NewProxy starts a proxy to target (host:port, or a nats:// URL's host and port) that runs
// until t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("natstest: proxy: %v", err)
	}
	p := &Proxy{URL: "nats://" + ln.Addr().String(), ln: ln, target: strings.TrimPrefix(target, "nats://")}
	p.thawed = sync.NewCond(&p.mu)
	t.Cleanup(p.close)
	go p.accept()
	return p
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// pipe copies from src to dst, holding what it read while the proxy is frozen.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen {
				p.thawed.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Freeze holds every byte from now on, both ways, until Thaw.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// Thaw delivers what was held and lets bytes through again.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	p.frozen = false
	p.thawed.Broadcast()
	p.mu.Unlock()
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Thaw()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}
