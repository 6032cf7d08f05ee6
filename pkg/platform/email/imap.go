package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/atmost/atmost/pkg/platform"
)

// mailbox is the account's mailbox opened read-only over IMAP.
type mailbox struct {
	c    *imapclient.Client
	stop func() bool
}

func (m *mailbox) close() {
	m.stop()
	_ = m.c.Close()
}

// open logs in to the IMAP server and examines (selects read-only) the account's mailbox. The
// context's end closes the connection.
func (a *adapter) open(ctx context.Context) (*mailbox, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", a.cfg.imap)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	fail := func(err error) (*mailbox, error) {
		stop()
		_ = conn.Close()
		return nil, err
	}
	var c *imapclient.Client
	if a.cfg.imapStartTLS {
		if c, err = imapclient.NewStartTLS(conn, &imapclient.Options{TLSConfig: a.cfg.tls(a.cfg.imapHost)}); err != nil {
			return fail(fmt.Errorf("starttls: %w", err))
		}
	} else {
		tc := tls.Client(conn, a.cfg.tls(a.cfg.imapHost))
		if err := tc.HandshakeContext(ctx); err != nil {
			return fail(fmt.Errorf("tls: %w", err))
		}
		c = imapclient.New(tc, nil)
	}
	m := &mailbox{c: c, stop: stop}
	if err := c.WaitGreeting(); err != nil {
		m.close()
		return nil, fmt.Errorf("greeting: %w", err)
	}
	if err := c.Login(a.cfg.username, string(a.password)).Wait(); err != nil {
		m.close()
		return nil, fmt.Errorf("login: %w", err)
	}
	if _, err := c.Select(a.cfg.mailbox, &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		m.close()
		return nil, fmt.Errorf("mailbox %q: %w", a.cfg.mailbox, err)
	}
	return m, nil
}

// copyOf is one message of the mailbox that carries a Message-ID.
type copyOf struct {
	uid  imap.UID
	key  string // its KeyHeader
	text string // its text, decoded
}

// find returns the messages of the mailbox whose Message-ID is id, oldest first. IMAP's
// header search matches substrings, so each one is fetched and its header compared whole.
func (m *mailbox) find(id string) ([]copyOf, error) {
	// NOOP: the server looks at the mailbox afresh, and a copy delivered since shows.
	if err := m.c.Noop().Wait(); err != nil {
		return nil, fmt.Errorf("noop: %w", err)
	}
	data, err := m.c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: id}}}, nil).Wait()
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	uids := data.AllUIDs()
	if len(uids) == 0 {
		return nil, nil
	}
	section := &imap.FetchItemBodySection{Peek: true}
	msgs, err := m.c.Fetch(imap.UIDSetNum(uids...), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	var out []copyOf
	for _, msg := range msgs {
		parsed, err := mail.ReadMessage(bytes.NewReader(msg.FindBodySection(section)))
		if err != nil || strings.TrimSpace(parsed.Header.Get("Message-ID")) != id {
			continue
		}
		text, err := decodeText(parsed)
		if err != nil {
			text = "[the message's text cannot be decoded: " + err.Error() + "]"
		}
		out = append(out, copyOf{uid: msg.UID, key: strings.TrimSpace(parsed.Header.Get(KeyHeader)), text: text})
	}
	// UIDs grow with arrival: the first is the oldest.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].uid < out[j-1].uid; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// decodeText is the message's text: its body, decoded from its transfer encoding.
func decodeText(m *mail.Message) (string, error) {
	r := m.Body
	switch strings.ToLower(strings.TrimSpace(m.Header.Get("Content-Transfer-Encoding"))) {
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, stripNewlines{m.Body})
	case "quoted-printable":
		r = quotedprintable.NewReader(m.Body)
	}
	b, err := io.ReadAll(r)
	return string(b), err
}

// stripNewlines drops CR and LF, which base64's decoder does not take.
type stripNewlines struct{ r io.Reader }

func (s stripNewlines) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	k := 0
	for _, c := range p[:n] {
		if c != '\r' && c != '\n' {
			p[k] = c
			k++
		}
	}
	return k, err
}

// ReadBack finds the message objectID (a Message-ID) in the account's mailbox and returns its
// text: platform.ErrNotFound when the mailbox holds none, another error when the server could
// not be asked. The server delivers the copy a moment after its 250, so a first read may find
// nothing: the dispatcher reads again within its read-back budget. A message whose delivery
// key is not r's reads back with a text that says so, so that the comparison fails.
func (a *adapter) ReadBack(ctx context.Context, r platform.Request, objectID string) (platform.Object, error) {
	fail := func(format string, args ...any) error {
		return redactedError{err: fmt.Errorf("email: read back %s: "+format, append([]any{objectID}, args...)...), pw: a.password}
	}
	if !strings.HasPrefix(objectID, "<") || !strings.HasSuffix(objectID, ">") || strings.ContainsAny(objectID, " \r\n\"") {
		return platform.Object{}, fail("not a Message-ID")
	}
	m, err := a.open(ctx)
	if err != nil {
		return platform.Object{}, fail("%w", err)
	}
	defer m.close()
	copies, err := m.find(objectID)
	if err != nil {
		return platform.Object{}, fail("%w", err)
	}
	if len(copies) == 0 {
		return platform.Object{}, fail("%w in %s", platform.ErrNotFound, a.cfg.mailbox)
	}
	c := copies[0]
	if c.key != r.Key.String() {
		return platform.Object{ID: objectID, Text: fmt.Sprintf("[the message %s is not the one requested: its delivery key is %q, not %s]", objectID, c.key, r.Key)}, nil
	}
	return platform.Object{ID: objectID, Text: c.text}, nil
}

// Lookup searches the account's mailbox once for the message with r's Message-ID and delivery
// key. Found proves the server accepted the message: the copy is made only from a message it
// queued. Not found proves nothing (no StatusLookup): the copy may not have landed yet, may
// have been moved or deleted from the mailbox, and SMTP keeps no record a client could ask of
// a transaction whose answer it lost.
func (a *adapter) Lookup(ctx context.Context, r platform.Request) platform.Lookup {
	id := MessageID(r.Key, a.cfg.fromDomain)
	detail := map[string]any{"message_id": id, "mailbox": a.cfg.mailbox}
	unavailable := func(err error) platform.Lookup {
		detail["error"] = a.password.redact(err.Error())
		return platform.Lookup{Result: platform.Unavailable, Detail: detail}
	}
	m, err := a.open(ctx)
	if err != nil {
		return unavailable(err)
	}
	defer m.close()
	copies, err := m.find(id)
	if err != nil {
		return unavailable(err)
	}
	n := 0
	for _, c := range copies {
		if c.key == r.Key.String() {
			n++
		}
	}
	if n > 0 {
		detail["copies"] = n
		return platform.Lookup{Result: platform.Found, ObjectID: id, Detail: detail}
	}
	if len(copies) > 0 {
		detail["other_keys"] = len(copies)
	}
	detail["why"] = "not finding the copy proves nothing: it may not have landed yet, or was moved or deleted from the mailbox"
	return platform.Lookup{Result: platform.NotFound, Detail: detail}
}
