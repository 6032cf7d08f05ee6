package matrixlane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/atmost/atmost/internal/testkit/matrixlane"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/matrix"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

// The Matrix adapter meets the adapter contract on a real Dendrite: each case gets a room of
// its own and a Proxy in front of Dendrite that plays the suite's answers (a drop, a 500 or an
// empty 200 after Dendrite stored the event, a 401 Dendrite itself gives to another token, a
// 429, 409 or 307 from the proxy), and the truth is what the room holds, read by the observer.
func TestConformanceOnDendrite(t *testing.T) {
	s := server(t)
	platformtest.Run(t, platformtest.Harness{
		Open: func(t *testing.T) (platform.Adapter, platformtest.Platform) {
			room := matrixlane.NewRoom(t, s)
			proxy := matrixlane.NewProxy(s.URL, 0, 1)
			proxy.SlowBy = platformtest.SlowBy
			proxy.Visible = func(id string) { visible(s, room.ID, id) }
			t.Cleanup(proxy.Close)
			return openAdapter(t, s, room.ID, proxy.URL(), "2s"), &dendrite{t: t, room: room, proxy: proxy, seen: map[string][]string{}}
		},
		Request: func(t *testing.T, text string) platform.Request { return platformtest.Post(t, account, text) },
	})
}

const account = "acct-matrix"

var credentials atomic.Int64

// openAdapter opens the adapter for the bot in room, through homeserver, with the access token
// behind an env: credential reference as an operator's would be.
func openAdapter(t testing.TB, s *matrixlane.Server, room, homeserver, reconcileDelay string) platform.Adapter {
	t.Helper()
	a := accountFor(t, s, room, homeserver, reconcileDelay)
	ad, err := matrix.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	return ad
}

func accountFor(t testing.TB, s *matrixlane.Server, room, homeserver, reconcileDelay string) platform.Account {
	t.Helper()
	// os.Setenv, not t.Setenv: tests may run in parallel, each with its own variable.
	name := fmt.Sprintf("ATMOST_TEST_MATRIX_TOKEN_%d_%d", os.Getpid(), credentials.Add(1))
	if err := os.Setenv(name, s.AccessToken); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Unsetenv(name) })
	settings, err := json.Marshal(map[string]any{"homeserver": homeserver, "room_id": room, "user_id": s.UserID,
		"reconcile_delay": reconcileDelay})
	if err != nil {
		t.Fatal(err)
	}
	return platform.Account{ID: account, Platform: matrix.Name, Settings: settings, CredentialRef: "env:" + name, CredentialVersion: 1}
}

// visible waits, without failing anyone (it runs on the proxy's goroutines), until the event
// reads back from Dendrite: at most 30 s.
func visible(s *matrixlane.Server, room, id string) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/_matrix/client/v3/rooms/"+url.PathEscape(room)+"/event/"+url.PathEscape(id), nil)
		req.Header.Set("Authorization", "Bearer "+s.ObserverToken)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dendrite is the suite's Platform: a room of the real Dendrite behind a Proxy.
type dendrite struct {
	t     *testing.T
	room  *matrixlane.Room
	proxy *matrixlane.Proxy

	mu   sync.Mutex
	seen map[string][]string // delivery key -> the event ids the room held for it, once seen
}

func (d *dendrite) Next(a platformtest.Answer) {
	f, ok := map[platformtest.Answer]matrixlane.Fault{
		platformtest.Accept:           matrixlane.Forward,
		platformtest.DropBeforeRead:   matrixlane.DropBeforeRead,
		platformtest.DropAfterCommit:  matrixlane.DropAfterCommit,
		platformtest.ErrorAfterCommit: matrixlane.ErrorAfterCommit,
		platformtest.RateLimit:        matrixlane.RateLimit,
		platformtest.Refuse:           matrixlane.BadToken,
		platformtest.RefuseUndeclared: matrixlane.Conflict,
		platformtest.Redirect:         matrixlane.Redirect,
		platformtest.SuccessWithoutID: matrixlane.SuccessWithoutID,
		platformtest.Slow:             matrixlane.Slow,
	}[a]
	if !ok {
		d.t.Fatalf("the Dendrite harness cannot play %s", a)
	}
	d.proxy.DropNext(f)
}

func (d *dendrite) Creates() [][]byte { return d.proxy.Sends() }

func (d *dendrite) Requests() int { return d.proxy.Requests() }

// Objects are the bot's messages in the room that carry r's delivery key, oldest first, and
// those seen before that a redaction has since stripped of it.
func (d *dendrite) Objects(r platform.Request) []string {
	d.refresh()
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen[r.Key.String()])
}

// refresh reads the room and remembers every message's key.
func (d *dendrite) refresh() {
	keyed := matrixlane.Keyed(d.room.Events(d.t), d.room.S.UserID)
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, ids := range keyed {
		for _, id := range ids {
			if !slices.Contains(d.seen[k], id) {
				d.seen[k] = append(d.seen[k], id)
			}
		}
	}
}

func (d *dendrite) Edit(id, text string) { d.room.Edit(d.t, id, text) }

func (d *dendrite) Delete(id string) {
	d.refresh() // remember the key before the redaction strips it
	d.room.Redact(d.t, id)
}

func (d *dendrite) Down() { d.proxy.Close() }

func (d *dendrite) Secrets() []string {
	return []string{d.room.S.AccessToken, d.room.S.ObserverToken}
}
