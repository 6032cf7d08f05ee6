package emaillane_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/atmost/atmost/internal/testkit/emaillane"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

// The email adapter meets the adapter contract on a real Postfix and Dovecot: each case gets a
// Proxy in front of both that plays the suite's answers after the client's final dot (a drop
// before or after Postfix queued the message, a 451 after it did, a 421 or 554 of its own, a
// hold past the deadline), and the truth is what the bot's Archive holds, read over IMAP.
func TestConformanceOnPostfixAndDovecot(t *testing.T) {
	l := lane(t)
	archive := l.Archive()
	platformtest.Run(t, platformtest.Harness{
		Open: func(t *testing.T) (platform.Adapter, platformtest.Platform) {
			proxy, err := emaillane.NewProxy(l, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			proxy.SlowBy = platformtest.SlowBy
			proxy.Visible = archive.WaitHolds
			t.Cleanup(proxy.Close)
			ad := open(t, accountFor(t, l, proxy.Submission(), proxy.IMAP(), proxy.PEM, l.BotPassword))
			return ad, &mailServers{t: t, l: l, box: archive, proxy: proxy, seen: map[string][]string{}}
		},
		Request: func(t *testing.T, text string) platform.Request { return platformtest.Post(t, account, text) },
		Exceptions: map[string]string{
			"Send/answered with a redirect is unknown, and the redirect is never followed": "SMTP has no redirect to follow: " +
				"a 551 to RCPT comes before the message's text and proves it not sent",
			"Send/answered with a success naming no object is unknown": "the object id is the Message-ID the adapter writes " +
				"into the message, not one the server hands back: every 250 names it",
		},
	})
}

// mailServers is the suite's Platform: Postfix and Dovecot behind a Proxy.
type mailServers struct {
	t     *testing.T
	l     *emaillane.Lane
	box   *emaillane.Box
	proxy *emaillane.Proxy

	mu   sync.Mutex
	seen map[string][]string // delivery key -> the Message-IDs the Archive held for it, once seen
}

func (m *mailServers) Next(a platformtest.Answer) {
	f, ok := map[platformtest.Answer]emaillane.Fault{
		platformtest.Accept:           emaillane.Forward,
		platformtest.DropBeforeRead:   emaillane.DropBeforeRead,
		platformtest.DropAfterCommit:  emaillane.DropAfterCommit,
		platformtest.ErrorAfterCommit: emaillane.ErrorAfterCommit,
		platformtest.RateLimit:        emaillane.RateLimit,
		platformtest.RefuseUndeclared: emaillane.Refuse,
		platformtest.Slow:             emaillane.Slow,
	}[a]
	if !ok {
		m.t.Fatalf("the mail servers' harness cannot play %s", a)
	}
	m.proxy.DropNext(f)
}

func (m *mailServers) Creates() [][]byte { return m.proxy.Sends() }

func (m *mailServers) Requests() int { return m.proxy.Requests() }

// Objects are the Archive's copies that carry r's delivery key, and those seen before and
// deleted since.
func (m *mailServers) Objects(r platform.Request) []string {
	m.refresh()
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.seen[r.Key.String()])
}

func (m *mailServers) refresh() {
	keyed := m.box.Keyed(m.t)
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, ids := range keyed {
		if len(ids) > len(m.seen[k]) {
			m.seen[k] = ids
		}
	}
}

func (m *mailServers) Edit(id, text string) { m.box.Edit(m.t, id, text) }

func (m *mailServers) Delete(id string) {
	m.refresh()
	m.box.Delete(m.t, id)
}

func (m *mailServers) Down() { m.proxy.Close() }

func (m *mailServers) Secrets() []string { return []string{m.l.BotPassword, m.l.ReaderPassword} }
