package emaillane

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/mail"
	"net/textproto"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// KeyHeader is the header the adapter puts the delivery key in (email.KeyHeader; not imported,
// so that the lane reads the mailboxes as a person's client would, without the adapter's code).
const KeyHeader = "X-Atmost-Delivery-Key"

// Box is a mailbox of the lane, read and changed directly on Dovecot (never through a Proxy):
// the servers' own record.
type Box struct {
	L              *Lane
	User, Password string
	Name           string
}

// Archive is the bot's mailbox of copies: every message Postfix accepted from the bot.
func (l *Lane) Archive() *Box {
	return &Box{L: l, User: l.Bot, Password: l.BotPassword, Name: l.ArchiveName}
}

// Inbox is the reader's INBOX: every message delivered to the person.
func (l *Lane) Inbox() *Box {
	return &Box{L: l, User: l.Reader, Password: l.ReaderPassword, Name: "INBOX"}
}

// TLSConfig trusts the lane's certificate.
func (l *Lane) TLSConfig() (*tls.Config, error) {
	pem, err := os.ReadFile(l.CAFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no certificate", l.CAFile)
	}
	return &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12}, nil
}

// open logs in and selects the mailbox (read-write unless readOnly).
func (b *Box) open(readOnly bool) (*imapclient.Client, error) {
	cfg, err := b.L.TLSConfig()
	if err != nil {
		return nil, err
	}
	c, err := imapclient.DialTLS(b.L.IMAP, &imapclient.Options{TLSConfig: cfg})
	if err != nil {
		return nil, err
	}
	if err := c.Login(b.User, b.Password).Wait(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("login %s: %w", b.User, err)
	}
	if _, err := c.Select(b.Name, &imap.SelectOptions{ReadOnly: readOnly}).Wait(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("select %s: %w", b.Name, err)
	}
	return c, nil
}

// Message is one message of a Box, as its headers say.
type Message struct {
	UID       imap.UID
	MessageID string
	Key       string
}

var headerSection = &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, Peek: true}

// messages fetches the headers of the messages uids, or of every message when uids is nil.
func messages(c *imapclient.Client, uids []imap.UID) ([]Message, error) {
	if uids == nil {
		data, err := c.UIDSearch(&imap.SearchCriteria{}, nil).Wait()
		if err != nil {
			return nil, err
		}
		uids = data.AllUIDs()
	}
	if len(uids) == 0 {
		return nil, nil
	}
	set := imap.UIDSetNum(uids...)
	msgs, err := c.Fetch(set, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{headerSection}}).Collect()
	if err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(m.FindBodySection(headerSection)))).ReadMIMEHeader()
		if err != nil && len(h) == 0 {
			return nil, fmt.Errorf("the header of UID %d: %w", m.UID, err)
		}
		out = append(out, Message{UID: m.UID, MessageID: strings.TrimSpace(h.Get("Message-Id")), Key: strings.TrimSpace(h.Get(KeyHeader))})
	}
	return out, nil
}

// All is every message of the box, by UID order (oldest first).
func (b *Box) All(t testing.TB) []Message {
	t.Helper()
	c, err := b.open(true)
	if err != nil {
		t.Fatalf("%s's %s: %v", b.User, b.Name, err)
	}
	defer c.Close()
	msgs, err := messages(c, nil)
	if err != nil {
		t.Fatalf("%s's %s: %v", b.User, b.Name, err)
	}
	return msgs
}

// Keyed groups the box's messages by the delivery key they carry, with their Message-IDs.
func (b *Box) Keyed(t testing.TB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range b.All(t) {
		if m.Key != "" {
			out[m.Key] = append(out[m.Key], m.MessageID)
		}
	}
	return out
}

// find is the UIDs of the messages whose Message-ID is id.
func find(c *imapclient.Client, id string) ([]imap.UID, error) {
	data, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: id}}}, nil).Wait()
	if err != nil {
		return nil, err
	}
	msgs, err := messages(c, data.AllUIDs())
	if err != nil {
		return nil, err
	}
	var out []imap.UID
	for _, m := range msgs {
		if m.MessageID == id {
			out = append(out, m.UID)
		}
	}
	return out, nil
}

// Holds reports whether the box holds a message with the Message-ID id. It never fails t (a
// proxy's goroutine calls it): an error is no.
func (b *Box) Holds(id string) bool {
	c, err := b.open(true)
	if err != nil {
		return false
	}
	defer c.Close()
	uids, err := find(c, id)
	return err == nil && len(uids) > 0
}

// WaitHolds waits, without failing anyone, until the box holds the message id: at most 30 s.
// Postfix answers 250 once the message is queued and delivers it a moment later.
func (b *Box) WaitHolds(id string) {
	deadline := time.Now().Add(30 * time.Second)
	for !b.Holds(id) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// Edit replaces the text of the message id with text, as a person's client that rewrites a
// message in the mailbox does: the message is appended again with the new text (its headers
// kept), and the old one expunged.
func (b *Box) Edit(t testing.TB, id, text string) {
	t.Helper()
	c, err := b.open(false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uids, err := find(c, id)
	if err != nil || len(uids) == 0 {
		t.Fatalf("edit %s: not in %s (%v)", id, b.Name, err)
	}
	whole := &imap.FetchItemBodySection{Peek: true}
	msgs, err := c.Fetch(imap.UIDSetNum(uids[0]), &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{whole}}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("edit %s: fetch: %v", id, err)
	}
	m, err := mail.ReadMessage(bytes.NewReader(msgs[0].FindBodySection(whole)))
	if err != nil {
		t.Fatalf("edit %s: %v", id, err)
	}
	var out bytes.Buffer
	for name, values := range m.Header {
		if strings.EqualFold(name, "Content-Transfer-Encoding") {
			continue
		}
		for _, v := range values {
			out.WriteString(name + ": " + v + "\r\n")
		}
	}
	out.WriteString("Content-Transfer-Encoding: base64\r\n\r\n" + base64.StdEncoding.EncodeToString([]byte(text)) + "\r\n")
	app := c.Append(b.Name, int64(out.Len()), nil)
	if _, err := app.Write(out.Bytes()); err != nil {
		t.Fatalf("edit %s: append: %v", id, err)
	}
	if err := app.Close(); err != nil {
		t.Fatalf("edit %s: append: %v", id, err)
	}
	if _, err := app.Wait(); err != nil {
		t.Fatalf("edit %s: append: %v", id, err)
	}
	expunge(t, c, uids[:1])
}

// Delete removes every message id from the box, as a person deleting it does.
func (b *Box) Delete(t testing.TB, id string) {
	t.Helper()
	c, err := b.open(false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uids, err := find(c, id)
	if err != nil {
		t.Fatalf("delete %s: %v", id, err)
	}
	expunge(t, c, uids)
}

func expunge(t testing.TB, c *imapclient.Client, uids []imap.UID) {
	t.Helper()
	if len(uids) == 0 {
		return
	}
	set := imap.UIDSetNum(uids...)
	if err := c.Store(set, &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Close(); err != nil {
		t.Fatalf("store \\Deleted: %v", err)
	}
	if err := c.UIDExpunge(set).Close(); err != nil {
		t.Fatalf("expunge: %v", err)
	}
}
