package email_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/email"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

const (
	account  = "acct-mail"
	password = "s3cret-password"
)

// server is a submission server in the test's process (go-smtp) that refuses at a chosen
// step, or hangs up after the final dot, and records what it received.
type server struct {
	addr   string
	pem    []byte
	noTLS  bool
	refuse string // the step whose command it refuses ("auth", "mail", "rcpt", "data", "end")
	code   int
	hangUp bool // after reading the whole message, close the connection without a reply

	mu     sync.Mutex
	auths  int
	bodies [][]byte
	conns  int
}

func newServer(t *testing.T, configure func(*server)) *server {
	t.Helper()
	s := &server{code: 550}
	if configure != nil {
		configure(s)
	}
	cert, pemBytes := selfSigned(t)
	s.pem = pemBytes
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = ln.Addr().String()
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		s.mu.Lock()
		s.conns++
		s.mu.Unlock()
		return &session{s: s, c: c}, nil
	}))
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true // so that a client that skipped TLS would be seen sending AUTH
	if !s.noTLS {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *server) refusal() error {
	return &smtp.SMTPError{Code: s.code, EnhancedCode: smtp.EnhancedCode{s.code / 100, 0, 0}, Message: "refused by the test"}
}

type session struct {
	s *server
	c *smtp.Conn
}

func (x *session) AuthMechanisms() []string { return []string{sasl.Plain} }
func (x *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pw string) error {
		x.s.mu.Lock()
		x.s.auths++
		x.s.mu.Unlock()
		if x.s.refuse == email.StepAuth || pw != password {
			return x.s.refusal()
		}
		return nil
	}), nil
}
func (x *session) Mail(string, *smtp.MailOptions) error { return x.step(email.StepMail) }
func (x *session) Rcpt(string, *smtp.RcptOptions) error { return x.step(email.StepRcpt) }
func (x *session) Reset()                               {}
func (x *session) Logout() error                        { return nil }
func (x *session) step(s string) error {
	if x.s.refuse == s {
		return x.s.refusal()
	}
	return nil
}
func (x *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	x.s.mu.Lock()
	x.s.bodies = append(x.s.bodies, b)
	x.s.mu.Unlock()
	if x.s.hangUp {
		_ = x.c.Close()
		return errors.New("hung up")
	}
	return x.step(email.StepEnd)
}

func (s *server) received() (auths int, bodies [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auths, append([][]byte(nil), s.bodies...)
}

func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// settings are an account's settings for s, with change applied to the map first.
func settings(t *testing.T, s *server, change func(map[string]any)) json.RawMessage {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, s.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	m := map[string]any{"submission": s.addr, "imap": "127.0.0.1:1", "ca_file": ca, "username": "bot@example.test",
		"from": "bot@example.test", "to": []string{"reader@example.test"}, "mailbox": "Archive"}
	if change != nil {
		change(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openFor(t *testing.T, raw json.RawMessage) (platform.Adapter, error) {
	t.Helper()
	return email.Open(platform.Account{ID: account, Platform: email.Name, Settings: raw, CredentialRef: "env:X",
		Credential: func() (string, error) { return password, nil }})
}

func mustOpen(t *testing.T, s *server) platform.Adapter {
	t.Helper()
	ad, err := openFor(t, settings(t, s, nil))
	if err != nil {
		t.Fatal(err)
	}
	return ad
}

func send(t *testing.T, ad platform.Adapter, text string) (platform.Request, platform.Prepared, platform.Outcome) {
	t.Helper()
	r := platformtest.Post(t, account, text)
	p, err := ad.Prepare(r)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r, p, ad.Send(ctx, p)
}

// A 250 to the final dot is Sent, named by the Message-ID derived from the delivery key, and
// the server received the prepared message byte for byte (dot-stuffing undone), once.
func TestAnAcceptedMessageIsSentUnderItsMessageID(t *testing.T) {
	s := newServer(t, nil)
	ad := mustOpen(t, s)
	r, p, out := send(t, ad, ".a line that starts with a dot\nand é")
	if out.Result != platform.Sent || out.ObjectID != email.MessageID(r.Key, "example.test") {
		t.Fatalf("ended %s %q, want sent %q; detail %v", out.Result, out.ObjectID, email.MessageID(r.Key, "example.test"), out.Detail)
	}
	_, bodies := s.received()
	if len(bodies) != 1 || string(bodies[0]) != string(p.Body) {
		t.Fatalf("the server received %q, want the prepared %q once", bodies, p.Body)
	}
	for _, h := range []string{"Message-ID: " + out.ObjectID + "\r\n", email.KeyHeader + ": " + r.Key.String() + "\r\n"} {
		if !strings.Contains(string(p.Body), h) {
			t.Errorf("the message lacks %q", h)
		}
	}
}

// Every refusal before the server's 354 to DATA proves nothing was queued: NotSent,
// platform_rejected, at the step refused. After the final dot, neither a refusal nor a
// dropped connection proves anything: Unknown.
func TestTheStepOfAFailureDecidesWhetherItProvesNotSent(t *testing.T) {
	for _, c := range []struct {
		refuse string
		code   int
		hangUp bool
		want   platform.Result
		reason platform.Reason
		bodies int
	}{
		{refuse: email.StepAuth, code: 535, want: platform.NotSent, reason: platform.ReasonPlatformRejected},
		{refuse: email.StepMail, code: 550, want: platform.NotSent, reason: platform.ReasonPlatformRejected},
		{refuse: email.StepRcpt, code: 450, want: platform.NotSent, reason: platform.ReasonPlatformRejected},
		{refuse: email.StepRcpt, code: 550, want: platform.NotSent, reason: platform.ReasonPlatformRejected},
		{refuse: email.StepEnd, code: 554, want: platform.Unknown, reason: platform.ReasonSendUnknown, bodies: 1},
		{refuse: email.StepEnd, code: 451, want: platform.Unknown, reason: platform.ReasonSendUnknown, bodies: 1},
		{refuse: email.StepEnd, hangUp: true, want: platform.Unknown, reason: platform.ReasonSendUnknown, bodies: 1},
	} {
		t.Run(fmt.Sprintf("%s-%d-hangup=%t", c.refuse, c.code, c.hangUp), func(t *testing.T) {
			s := newServer(t, func(s *server) { s.refuse, s.code, s.hangUp = c.refuse, c.code, c.hangUp })
			ad := mustOpen(t, s)
			_, _, out := send(t, ad, "refused at "+c.refuse)
			if out.Result != c.want || out.Reason != c.reason || out.ObjectID != "" {
				t.Fatalf("ended %s (%s) %q, want %s (%s); detail %v", out.Result, out.Reason, out.ObjectID, c.want, c.reason, out.Detail)
			}
			if out.Detail["step"] != c.refuse {
				t.Errorf("the step is %v, want %s", out.Detail["step"], c.refuse)
			}
			if !c.hangUp && out.Detail["reply"] != c.code {
				t.Errorf("the reply is %v, want %d", out.Detail["reply"], c.code)
			}
			if strings.Contains(strings.Join(strings.Fields(stringOf(out.Detail)), " "), password) {
				t.Errorf("the detail shows the password")
			}
			if _, bodies := s.received(); len(bodies) != c.bodies {
				t.Errorf("the server received %d messages, want %d: no retry", len(bodies), c.bodies)
			}
		})
	}
}

func stringOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A server that offers no STARTTLS never sees the password: the send is NotSent before AUTH.
func TestAServerWithoutStartTLSNeverSeesThePassword(t *testing.T) {
	s := newServer(t, func(s *server) { s.noTLS = true })
	ad := mustOpen(t, s)
	_, _, out := send(t, ad, "over a server without TLS")
	if out.Result != platform.NotSent || out.Detail["step"] != email.StepTLS {
		t.Fatalf("ended %s at %v, want not sent at %s; detail %v", out.Result, out.Detail["step"], email.StepTLS, out.Detail)
	}
	if auths, bodies := s.received(); auths != 0 || len(bodies) != 0 {
		t.Fatalf("the server saw %d AUTH and %d messages, want none", auths, len(bodies))
	}
}

// A server nobody listens on: NotSent, connection_failed.
func TestAnUnreachableServerIsNotSent(t *testing.T) {
	s := newServer(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ad, err := openFor(t, settings(t, s, func(m map[string]any) { m["submission"] = addr }))
	if err != nil {
		t.Fatal(err)
	}
	_, _, out := send(t, ad, "to nobody")
	if out.Result != platform.NotSent || out.Reason != platform.ReasonConnectionFailed {
		t.Fatalf("ended %s (%s), want not sent (connection_failed)", out.Result, out.Reason)
	}
}

// Prepare renders the same message for the same request, and a message another intent's.
func TestPrepareIsTheSameForOneIntentAndDiffersForAnother(t *testing.T) {
	s := newServer(t, nil)
	ad := mustOpen(t, s)
	r := platformtest.Post(t, account, "once")
	p1, err1 := ad.Prepare(r)
	p2, err2 := ad.Prepare(r)
	p3, err3 := ad.Prepare(platformtest.Post(t, account, "another"))
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if p1.Hash != p2.Hash || string(p1.Body) != string(p2.Body) {
		t.Errorf("two Prepares of one request differ")
	}
	if p1.Hash == p3.Hash {
		t.Errorf("two intents prepare the same hash")
	}
	if strings.Contains(string(p1.Body)+stringOf(p1.Header)+p1.URL, password) {
		t.Errorf("the prepared request holds the password")
	}
	for _, bad := range []platform.Request{
		{Key: r.Key, Account: account, Action: "reply", Request: r.Request},
		{Key: r.Key, Account: account, Action: "post", Target: "someone@example.test", Request: r.Request},
		{Key: r.Key, Account: account, Action: "post", Request: json.RawMessage(`{"text": ""}`)},
		{Key: r.Key, Account: account, Action: "post", Request: json.RawMessage(`{"text": "x", "subject": "a\r\nBcc: x@example.test"}`)},
	} {
		if _, err := ad.Prepare(bad); !errors.Is(err, platform.ErrUnsendable) {
			t.Errorf("Prepare of %+v: %v, want ErrUnsendable", bad, err)
		}
	}
}

// Open refuses settings that would send in clear, to a header-injecting address, or without
// the mailbox the lookup needs.
func TestOpenRefusesInvalidSettings(t *testing.T) {
	s := newServer(t, nil)
	for name, change := range map[string]func(map[string]any){
		"plaintext submission": func(m map[string]any) { m["submission_tls"] = "none" },
		"plaintext imap":       func(m map[string]any) { m["imap_tls"] = "none" },
		"no mailbox":           func(m map[string]any) { delete(m, "mailbox") },
		"no recipient":         func(m map[string]any) { m["to"] = []string{} },
		"an injected from":     func(m map[string]any) { m["from"] = "bot@example.test\r\nBcc: x@example.test" },
		"a named recipient":    func(m map[string]any) { m["to"] = []string{"Reader <reader@example.test>"} },
		"an unknown field":     func(m map[string]any) { m["password"] = "x" },
		"no port":              func(m map[string]any) { m["submission"] = "127.0.0.1" },
		"a negative delay":     func(m map[string]any) { m["reconcile_delay"] = "-1s" },
	} {
		if _, err := openFor(t, settings(t, s, change)); !errors.Is(err, email.ErrInvalidSettings) {
			t.Errorf("%s: Open answered %v, want ErrInvalidSettings", name, err)
		}
	}
}

// A prepared request changed after Prepare (what was authorized is not what would go) is not
// sent: the server sees no connection.
func TestAPreparedMessageChangedAfterPrepareIsNotSent(t *testing.T) {
	s := newServer(t, nil)
	ad := mustOpen(t, s)
	p, err := ad.Prepare(platformtest.Post(t, account, "authorized"))
	if err != nil {
		t.Fatal(err)
	}
	p.Body = append([]byte("Bcc: someone@example.test\r\n"), p.Body...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := ad.Send(ctx, p)
	if out.Result != platform.NotSent || out.Detail["step"] != email.StepVerify {
		t.Fatalf("ended %s at %v, want not sent at %s", out.Result, out.Detail["step"], email.StepVerify)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns != 0 {
		t.Fatalf("the server saw %d connections, want none", s.conns)
	}
}
