// Package faultproxy is the chaos suite's TCP fault proxy: it stands between atmost's roles and
// PostgreSQL or NATS, reads the protocol that passes (PostgreSQL's frontend messages, NATS's
// text protocol) and, at random with seeded rates, cuts a connection just after a COMMIT or a
// publish was forwarded (the server acted, the client hears nothing), cuts it just before,
// resets it mid-transaction, stalls it for seconds with the socket open, or delays it. These
// are the faults of a real network and a real failover, which a SIGKILL never makes: a commit
// whose answer is lost leaves the client not knowing what happened, and every guard that rests
// on "a failed write may have committed" is put to the test.
package faultproxy

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Protocol is what the proxy reads on its connections.
type Protocol string

const (
	// Postgres is PostgreSQL's frontend/backend protocol 3.0.
	Postgres Protocol = "postgres"
	// NATS is NATS's client text protocol.
	NATS Protocol = "nats"
)

// Fault is one thing the proxy does to a connection.
type Fault string

// The faults. Each is drawn at the moments it applies to, with its rate in Plan.Rates; one draw
// per moment decides between the faults that apply there.
const (
	// CutAfterCommit forwards a COMMIT (a simple query, or the Execute of a statement whose
	// text is COMMIT, pipelined or not) and closes both sides when the server answers it,
	// dropping the answer: the server committed, the client sees its connection end.
	// PostgreSQL.
	CutAfterCommit Fault = "cut_after_commit"
	// CutBeforeCommit closes both sides just before a COMMIT would be forwarded: the server rolls
	// the transaction back. PostgreSQL.
	CutBeforeCommit Fault = "cut_before_commit"
	// StallBeforeCommit holds a COMMIT, and everything behind and ahead of it, for a stall
	// (Plan.StallMin to StallMax) with both sockets open: the transaction keeps its locks.
	// PostgreSQL.
	StallBeforeCommit Fault = "stall_before_commit"
	// StallAfterCommit forwards a COMMIT and holds the server's answer for a stall: the server
	// committed, the client waits. PostgreSQL.
	StallAfterCommit Fault = "stall_after_commit"
	// CutAfterPublish forwards a PUB or HPUB and closes both sides: the server may store the
	// message or act on the ack it carries, the client hears nothing more. NATS.
	CutAfterPublish Fault = "cut_after_publish"
	// CutAfterMessage forwards a MSG or HMSG to the client and closes both sides: the client
	// holds a message whose ack cannot reach the server on this connection. NATS.
	CutAfterMessage Fault = "cut_after_message"
	// Stall holds a publish or a message, and both directions, for a stall. NATS.
	Stall Fault = "stall"
	// Reset sends an RST both ways (SO_LINGER 0): on PostgreSQL at a statement inside a
	// transaction, after the statements before it were forwarded; on NATS before a publish or
	// a message.
	Reset Fault = "reset"
	// Delay holds a statement (PostgreSQL) or a publish or a message (NATS) up to
	// Plan.DelayMax before forwarding it.
	Delay Fault = "delay"
)

// Faults lists each protocol's faults, in the order a draw walks their rates.
var Faults = map[Protocol][]Fault{
	Postgres: {CutAfterCommit, CutBeforeCommit, StallBeforeCommit, StallAfterCommit, Reset, Delay},
	NATS:     {CutAfterPublish, CutAfterMessage, Stall, Reset, Delay},
}

// The defaults of a Plan's bounds.
const (
	DefaultStallMin = 5 * time.Second
	DefaultStallMax = 40 * time.Second
	DefaultDelayMax = 300 * time.Millisecond
)

// Plan says what the proxy does.
type Plan struct {
	// Seed seeds every connection's draws (each connection its own stream of them).
	Seed uint64
	// Rates is each fault's probability at a moment it applies to; the zero Plan injects
	// nothing.
	Rates map[Fault]float64
	// StallMin and StallMax bound a stall (default DefaultStallMin, and DefaultStallMax or
	// StallMin if longer); DelayMax a delay (default DefaultDelayMax).
	StallMin, StallMax, DelayMax time.Duration
	// Until is when the faults stop (zero: they do not); Proxy.StopFaults moves it.
	Until time.Time
}

// Proxy forwards the connections it accepts to its target, injecting its plan's faults.
type Proxy struct {
	protocol Protocol
	target   string
	plan     Plan
	ln       net.Listener
	until    atomic.Int64 // unix nanoseconds; 0: faults never stop

	mu     sync.Mutex
	counts map[Fault]int
	conns  map[*conn]bool
	next   uint64 // connections accepted
	closed bool
	wg     sync.WaitGroup
}

// Start listens on a free port of loopback and forwards every connection to target
// (host:port), which speaks protocol.
func Start(protocol Protocol, target string, plan Plan) (*Proxy, error) {
	if _, ok := Faults[protocol]; !ok {
		return nil, fmt.Errorf("faultproxy: unknown protocol %q", protocol)
	}
	for f, rate := range plan.Rates {
		if !applies(protocol, f) {
			return nil, fmt.Errorf("faultproxy: %s is no fault of %s", f, protocol)
		}
		if rate < 0 || rate > 1 {
			return nil, fmt.Errorf("faultproxy: rate of %s %v: must be in [0, 1]", f, rate)
		}
	}
	plan.StallMin = cmp.Or(plan.StallMin, DefaultStallMin)
	if plan.StallMax < plan.StallMin {
		plan.StallMax = max(DefaultStallMax, plan.StallMin)
	}
	plan.DelayMax = cmp.Or(plan.DelayMax, DefaultDelayMax)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{protocol: protocol, target: target, plan: plan, ln: ln, counts: map[Fault]int{}, conns: map[*conn]bool{}}
	if !plan.Until.IsZero() {
		p.until.Store(plan.Until.UnixNano())
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func applies(protocol Protocol, f Fault) bool {
	for _, g := range Faults[protocol] {
		if g == f {
			return true
		}
	}
	return false
}

// Addr is the address the proxy listens on (127.0.0.1:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// StopFaults ends the faults now: a stall or delay under way runs its course, and every
// connection, old or new, is then forwarded untouched.
func (p *Proxy) StopFaults() { p.until.Store(time.Now().UnixNano()) }

// faulting reports whether faults are still injected.
func (p *Proxy) faulting() bool {
	u := p.until.Load()
	return u == 0 || time.Now().UnixNano() < u
}

// Counts returns how many times each fault was injected.
func (p *Proxy) Counts() map[Fault]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Fault]int, len(p.counts))
	for f, n := range p.counts {
		out[f] = n
	}
	return out
}

// Connections is the number of connections accepted.
func (p *Proxy) Connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int(p.next)
}

// Close stops listening and ends every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, c := range conns {
		c.close(false)
	}
	p.wg.Wait()
	return err
}

// Format writes the counts as "cut_after_commit 3, delay 40" in the order of the names.
func Format(counts map[Fault]int) string {
	var out []string
	for f, n := range counts {
		out = append(out, fmt.Sprintf("%s %d", f, n))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func (p *Proxy) count(f Fault) {
	p.mu.Lock()
	p.counts[f]++
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			return
		}
		p.next++
		id := p.next
		p.wg.Add(1)
		p.mu.Unlock()
		c := &conn{p: p, client: client.(*net.TCPConn), done: make(chan struct{}),
			rng: [2]*rand.Rand{rand.New(rand.NewPCG(p.plan.Seed, 2*id)), rand.New(rand.NewPCG(p.plan.Seed, 2*id+1))}}
		go func() {
			defer p.wg.Done()
			server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
			if err != nil {
				c.client.Close()
				return
			}
			c.server = server.(*net.TCPConn)
			// Registered once both sides exist: Close ends it from then on.
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				c.close(false)
				return
			}
			p.conns[c] = true
			p.mu.Unlock()
			c.run()
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
		}()
	}
}

// The two directions of a connection.
const (
	toServer = 0
	toClient = 1
)

// conn is one proxied connection.
type conn struct {
	p              *Proxy
	client, server *net.TCPConn
	rng            [2]*rand.Rand // one per direction: each pump draws from its own

	// hold is, per direction, the unix nanoseconds before which nothing is written that way.
	hold [2]atomic.Int64
	// cutAtCommit drops what the server sends until its answer to a COMMIT, and cuts the
	// connection there (CutAfterCommit).
	cutAtCommit atomic.Bool

	once sync.Once
	done chan struct{}
}

// run forwards both directions until one of them ends, then ends both.
func (c *conn) run() {
	var wg sync.WaitGroup
	wg.Go(func() {
		defer c.close(false)
		w := &writer{c: c, dir: toServer, dst: c.server}
		br := bufio.NewReaderSize(c.client, 64<<10)
		if c.p.protocol == Postgres {
			_ = c.frontend(br, w)
		} else {
			_ = c.natsPump(br, w, true)
		}
	})
	wg.Go(func() {
		defer c.close(false)
		w := &writer{c: c, dir: toClient, dst: c.client}
		if c.p.protocol == NATS {
			_ = c.natsPump(bufio.NewReaderSize(c.server, 64<<10), w, false)
			return
		}
		_ = c.backend(bufio.NewReaderSize(c.server, 64<<10), w)
	})
	wg.Wait()
}

// close ends both sides: with an RST each way when reset, else a FIN.
func (c *conn) close(reset bool) {
	c.once.Do(func() {
		for _, s := range []*net.TCPConn{c.client, c.server} {
			if reset {
				_ = s.SetLinger(0)
			}
			_ = s.Close()
		}
		close(c.done)
	})
}

// draw picks the fault among those given, with their rates, or "" for none; faults that
// stopped draw nothing.
func (c *conn) draw(dir int, among ...Fault) Fault {
	if !c.p.faulting() {
		return ""
	}
	u := c.rng[dir].Float64()
	for _, f := range among {
		if u -= c.p.plan.Rates[f]; u < 0 {
			c.p.count(f)
			return f
		}
	}
	return ""
}

// wait sleeps d, or until the connection ends; false if it ended.
func (c *conn) wait(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.done:
		return false
	case <-t.C:
		return true
	}
}

// stall is a duration between the plan's bounds, drawn for dir.
func (c *conn) stall(dir int) time.Duration {
	lo, hi := c.p.plan.StallMin, c.p.plan.StallMax
	return lo + time.Duration(c.rng[dir].Int64N(int64(hi-lo)+1))
}

func (c *conn) delay(dir int) time.Duration {
	return time.Duration(c.rng[dir].Int64N(int64(c.p.plan.DelayMax) + 1))
}

// holdBoth stops both directions for d, from now.
func (c *conn) holdBoth(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	c.hold[toServer].Store(until)
	c.hold[toClient].Store(until)
}

// errCut ends a pump whose connection the proxy cut on purpose.
var errCut = errors.New("faultproxy: connection cut")

// writer gathers what one direction forwards and writes it when the reader has nothing more
// at hand, so that what the client sent in one write (a pipelined batch) reaches the server
// in one write too, unless a fault falls between its messages.
type writer struct {
	c   *conn
	dir int
	dst *net.TCPConn
	buf []byte
}

func (w *writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if until := w.c.hold[w.dir].Load(); until != 0 {
		if !w.c.wait(time.Until(time.Unix(0, until))) {
			return errCut
		}
	}
	_, err := w.dst.Write(w.buf)
	w.buf = w.buf[:0]
	return err
}

// flushIfIdle writes what was gathered once the reader holds nothing more.
func (w *writer) flushIfIdle(r *bufio.Reader) error {
	if r.Buffered() > 0 {
		return nil
	}
	return w.flush()
}

// apply does fault f around forwarding msg, the bytes of one message; before a message, a
// fault of the "cut", "reset" or "stall before" kind acts first on what was gathered so far.
// It returns errCut once it closed the connection.
func (w *writer) apply(f Fault, msg []byte) error {
	c := w.c
	switch f {
	case Delay, Stall, StallBeforeCommit:
		if err := w.flush(); err != nil {
			return err
		}
		var d time.Duration
		if f == Delay {
			d = c.delay(w.dir)
		} else {
			d = c.stall(w.dir)
			c.holdBoth(d)
		}
		if !c.wait(d) {
			return errCut
		}
	case CutBeforeCommit:
		if err := w.flush(); err != nil {
			return err
		}
		c.close(false)
		return errCut
	case Reset:
		if err := w.flush(); err != nil {
			return err
		}
		c.close(true)
		return errCut
	case CutAfterCommit:
		// The connection is cut when the server answers the COMMIT, so it surely committed:
		// cut at once, the client would hear its connection end and cancel the statements
		// still running (pgx does) before the COMMIT ran. What follows the COMMIT (a pipelined
		// batch's Sync) is forwarded meanwhile.
		c.cutAtCommit.Store(true)
		time.AfterFunc(cutAtCommitWithin, func() { c.close(false) })
	case CutAfterPublish, CutAfterMessage:
		w.buf = append(w.buf, msg...)
		if err := w.flush(); err != nil {
			return err
		}
		c.close(false)
		return errCut
	case StallAfterCommit:
		until := time.Now().Add(c.stall(w.dir)).UnixNano()
		c.hold[toClient].Store(until) // before the COMMIT leaves: its answer waits
		w.buf = append(w.buf, msg...)
		if err := w.flush(); err != nil {
			return err
		}
		c.hold[toServer].Store(until)
		return nil
	}
	w.buf = append(w.buf, msg...)
	return nil
}

// readFull reads n bytes into a fresh slice.
func readFull(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
