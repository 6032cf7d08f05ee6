package emaillane

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Fault is what the Proxy does to one submission, once the client's final dot reached it.
type Fault string

const (
	// Forward relays the message to Postfix and Postfix's reply to the client.
	Forward Fault = ""
	// DropBeforeRead closes the client's connection without reading the message or forwarding
	// anything of it: Postfix queues nothing, the client's bytes had left.
	DropBeforeRead Fault = "drop_before_read"
	// DropAfterCommit forwards the message with its final dot, reads Postfix's 250 (the message
	// is queued by then) and closes the client's connection without relaying it.
	DropAfterCommit Fault = "drop_after_commit"
	// ErrorAfterCommit forwards the message and answers 451 instead of Postfix's 250.
	ErrorAfterCommit Fault = "error_after_commit"
	// Slow holds the message for SlowBy, then forwards it whether or not the client is still
	// there (Postfix queues it) and relays the reply.
	Slow Fault = "slow"
	// RateLimit answers 421 to the final dot itself, as a server over its rate does; nothing is
	// forwarded and the transaction with Postfix is abandoned.
	RateLimit Fault = "rate_limit"
	// Refuse answers 554 to the final dot itself; nothing is forwarded.
	Refuse Fault = "refuse"
)

// Proxy is an SMTP submission proxy in front of Postfix, and a TCP proxy in front of Dovecot's
// IMAP. It terminates the client's TLS with a certificate of its own (PEM), speaks to Postfix
// with STARTTLS, and forwards each command (AUTH, MAIL, RCPT) as the client gives it, so that
// Postfix's own refusals reach the client. A message meets the fault DropNext set, else, with
// probability Rate (seeded), DropAfterCommit. When Visible is set, a message Postfix accepted
// is waited for (Visible(Message-ID)) before the client is answered.
type Proxy struct {
	lane *Lane
	smtp *smtp.Server
	sl   net.Listener
	il   net.Listener

	// PEM is the proxy's certificate: an account behind the proxy trusts it with the lane's.
	PEM []byte
	// SlowBy is how long a Slow message is held.
	SlowBy time.Duration
	// Visible waits until the message id Postfix accepted has landed (nil: no wait).
	Visible func(messageID string)

	mu    sync.Mutex
	next  Fault
	rate  float64
	rng   *mrand.Rand
	sends [][]byte
	conns map[net.Conn]bool

	requests  atomic.Int64 // connections of either kind
	forwarded atomic.Int64 // messages forwarded to Postfix with their final dot
	dropped   atomic.Int64 // messages whose reply the proxy lost or replaced
	down      atomic.Bool
}

// NewProxy listens on two loopback ports; rate is the probability that a message meets
// DropAfterCommit, drawn from seed.
func NewProxy(l *Lane, rate float64, seed uint64) (*Proxy, error) {
	cert, certPEM, err := selfSigned()
	if err != nil {
		return nil, err
	}
	p := &Proxy{lane: l, PEM: certPEM, rate: rate, rng: mrand.New(mrand.NewPCG(seed, 1)), conns: map[net.Conn]bool{}}
	if p.sl, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	if p.il, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		_ = p.sl.Close()
		return nil, err
	}
	p.smtp = smtp.NewServer(smtp.BackendFunc(p.session))
	p.smtp.Domain = "localhost"
	p.smtp.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	p.smtp.ReadTimeout = time.Minute
	p.smtp.WriteTimeout = time.Minute
	p.smtp.ErrorLog = quiet{}
	go func() { _ = p.smtp.Serve(counting{p.sl, p}) }()
	go p.serveIMAP()
	return p, nil
}

// Submission and IMAP are the proxy's addresses: an account's submission and imap.
func (p *Proxy) Submission() string { return p.sl.Addr().String() }
func (p *Proxy) IMAP() string       { return p.il.Addr().String() }

// Close stops the proxy: every later connection is refused, and open ones are closed.
func (p *Proxy) Close() {
	if !p.down.CompareAndSwap(false, true) {
		return
	}
	_ = p.sl.Close()
	_ = p.il.Close()
	_ = p.smtp.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// DropNext makes the next message meet f; the one after it is drawn again.
func (p *Proxy) DropNext(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = f
}

// Sends are the messages that reached the proxy, in arrival order (nil for one dropped before
// it was read).
func (p *Proxy) Sends() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.sends...)
}

// Requests is how many connections of either kind reached the proxy.
func (p *Proxy) Requests() int { return int(p.requests.Load()) }

// Forwarded is how many messages reached Postfix with their final dot.
func (p *Proxy) Forwarded() int64 { return p.forwarded.Load() }

// Dropped is how many messages' replies the proxy lost or replaced.
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

func (p *Proxy) track(c net.Conn) bool {
	p.requests.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down.Load() {
		_ = c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

// counting counts and tracks the SMTP connections.
type counting struct {
	net.Listener
	p *Proxy
}

func (l counting) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.p.track(c) {
			return c, nil
		}
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}
func (quiet) Println(...any)        {}

// serveIMAP relays each IMAP connection to Dovecot byte for byte (TLS end to end).
func (p *Proxy) serveIMAP() {
	for {
		c, err := p.il.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			continue
		}
		go func() {
			defer c.Close()
			up, err := net.DialTimeout("tcp", p.lane.IMAP, 10*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
			<-done
		}()
	}
}

// session is one client connection, with its own connection to Postfix.
type session struct {
	p    *Proxy
	conn *smtp.Conn
	up   *smtp.Client
}

func (p *Proxy) session(c *smtp.Conn) (smtp.Session, error) {
	cfg, err := p.lane.TLSConfig()
	if err != nil {
		return nil, err
	}
	up, err := smtp.DialStartTLS(p.lane.Submission, cfg)
	if err != nil {
		return nil, &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 4, 1}, Message: "the lane's proxy cannot reach Postfix"}
	}
	return &session{p: p, conn: c, up: up}, nil
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		return s.up.Auth(sasl.NewPlainClient(identity, username, password))
	}), nil
}

func (s *session) Mail(from string, opts *smtp.MailOptions) error { return s.up.Mail(from, opts) }
func (s *session) Rcpt(to string, opts *smtp.RcptOptions) error   { return s.up.Rcpt(to, opts) }
func (s *session) Reset()                                         { _ = s.up.Reset() }
func (s *session) Logout() error                                  { return s.up.Close() }

// hangUp closes the client's connection: it sees no reply.
func (s *session) hangUp() error {
	_ = s.conn.Close()
	return errors.New("the lane's proxy hung up")
}

func (s *session) Data(r io.Reader) error {
	p := s.p
	f := p.take()
	if f == DropBeforeRead {
		p.mu.Lock()
		p.sends = append(p.sends, nil)
		p.mu.Unlock()
		p.dropped.Add(1)
		_ = s.up.Close()
		return s.hangUp()
	}
	body, err := io.ReadAll(r)
	p.mu.Lock()
	p.sends = append(p.sends, body)
	p.mu.Unlock()
	if err != nil {
		_ = s.up.Close()
		return s.hangUp()
	}
	switch f {
	case RateLimit:
		p.dropped.Add(1)
		_ = s.up.Close()
		return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "too many messages, try again later"}
	case Refuse:
		p.dropped.Add(1)
		_ = s.up.Close()
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "message refused"}
	case Slow:
		time.Sleep(p.SlowBy)
	}
	w, err := s.up.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(body); err != nil {
		return s.hangUp()
	}
	if err := w.Close(); err != nil {
		return err
	}
	p.forwarded.Add(1)
	if p.Visible != nil {
		if m, err := mail.ReadMessage(bytes.NewReader(body)); err == nil {
			p.Visible(strings.TrimSpace(m.Header.Get("Message-ID")))
		}
	}
	switch f {
	case DropAfterCommit:
		p.dropped.Add(1)
		return s.hangUp()
	case ErrorAfterCommit:
		p.dropped.Add(1)
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "local error in processing"}
	}
	return nil
}

// selfSigned is a certificate for 127.0.0.1 and localhost, and its PEM.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "atmost email lane proxy"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
