package matrixlane

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"
)

// Room is a room of the server that the bot created and the observer joined: the account the
// adapter posts as, and a person reading what the room holds.
type Room struct {
	S  *Server
	ID string
}

// NewRoom makes a room of its own for one test: the bot creates it and invites the observer,
// who joins.
func NewRoom(t testing.TB, s *Server) *Room {
	t.Helper()
	var created struct {
		RoomID string `json:"room_id"`
	}
	s.call(t, s.AccessToken, http.MethodPost, "/_matrix/client/v3/createRoom",
		map[string]any{"preset": "private_chat", "name": t.Name(), "invite": []string{s.ObserverID}}, &created)
	if created.RoomID == "" {
		t.Fatal("createRoom answered no room_id")
	}
	s.call(t, s.ObserverToken, http.MethodPost, "/_matrix/client/v3/rooms/"+url.PathEscape(created.RoomID)+"/join", map[string]any{}, nil)
	return &Room{S: s, ID: created.RoomID}
}

// Event is a client event as the API serves it.
type Event struct {
	EventID  string         `json:"event_id"`
	Sender   string         `json:"sender"`
	Type     string         `json:"type"`
	Content  map[string]any `json:"content"`
	Unsigned map[string]any `json:"unsigned"`
}

// Redacted reports whether the event was redacted.
func (e Event) Redacted() bool {
	_, ok := e.Unsigned["redacted_because"]
	return ok || len(e.Content) == 0
}

// Events is every event of the room, oldest first, as the observer reads it with /messages
// (backwards from the newest: Dendrite refuses a forward read without a from token): the
// room's own record, not the adapter's.
func (r *Room) Events(t testing.TB) []Event {
	t.Helper()
	var all []Event
	from := ""
	for {
		q := url.Values{"dir": {"b"}, "limit": {"100"}}
		if from != "" {
			q.Set("from", from)
		}
		var page struct {
			Chunk []Event `json:"chunk"`
			End   string  `json:"end"`
		}
		r.S.call(t, r.S.ObserverToken, http.MethodGet, "/_matrix/client/v3/rooms/"+url.PathEscape(r.ID)+"/messages?"+q.Encode(), nil, &page)
		all = append(all, page.Chunk...)
		if len(page.Chunk) == 0 || page.End == "" || page.End == from {
			slices.Reverse(all)
			return all
		}
		from = page.End
	}
}

// Event reads one event by id as the observer; ok is false on 404.
func (r *Room) Event(t testing.TB, id string) (Event, bool) {
	t.Helper()
	var ev Event
	status := r.S.do(t, r.S.ObserverToken, http.MethodGet, "/_matrix/client/v3/rooms/"+url.PathEscape(r.ID)+"/event/"+url.PathEscape(id), nil, &ev)
	if status == http.StatusNotFound {
		return Event{}, false
	}
	if status != http.StatusOK {
		t.Fatalf("GET event %s: status %d", id, status)
	}
	return ev, true
}

// WaitVisible waits until the event reads back as done says: the homeserver answers a send
// once its roomserver stored the event, and serves reads from its sync API a moment later.
func (r *Room) WaitVisible(t testing.TB, id string, done func(Event) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ev, ok := r.Event(t, id); ok && done(ev) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event %s never read back as expected", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Edit replaces the text of the bot's message id with an m.replace event the bot sends, as an
// edit in a client does, and waits until the edit is readable.
func (r *Room) Edit(t testing.TB, id, text string) {
	t.Helper()
	content := map[string]any{
		"msgtype": "m.text", "body": "* " + text,
		"m.new_content": map[string]any{"msgtype": "m.text", "body": text},
		"m.relates_to":  map[string]any{"rel_type": "m.replace", "event_id": id},
	}
	var sent struct {
		EventID string `json:"event_id"`
	}
	r.S.call(t, r.S.AccessToken, http.MethodPut, "/_matrix/client/v3/rooms/"+url.PathEscape(r.ID)+"/send/m.room.message/"+txn(), content, &sent)
	r.WaitVisible(t, sent.EventID, func(Event) bool { return true })
	deadline := time.Now().Add(30 * time.Second)
	for {
		var rel struct {
			Chunk []Event `json:"chunk"`
		}
		r.S.call(t, r.S.ObserverToken, http.MethodGet, "/_matrix/client/v1/rooms/"+url.PathEscape(r.ID)+"/relations/"+url.PathEscape(id)+"/m.replace", nil, &rel)
		for _, e := range rel.Chunk {
			if e.EventID == sent.EventID {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edit %s of %s never showed among its relations", sent.EventID, id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Redact deletes the event as its sender (the bot) does in a client, and waits until it reads
// back redacted.
func (r *Room) Redact(t testing.TB, id string) {
	t.Helper()
	r.S.call(t, r.S.AccessToken, http.MethodPut, "/_matrix/client/v3/rooms/"+url.PathEscape(r.ID)+"/redact/"+url.PathEscape(id)+"/"+txn(),
		map[string]any{"reason": "deleted by a person"}, nil)
	r.WaitVisible(t, id, Event.Redacted)
}

func txn() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "lane-" + hex.EncodeToString(b)
}

// call makes one request to the server directly (not through a proxy) and requires a 200.
func (s *Server) call(t testing.TB, token, method, path string, in, out any) {
	t.Helper()
	if status := s.do(t, token, method, path, in, out); status != http.StatusOK {
		t.Fatalf("%s %s: status %d", method, path, status)
	}
}

// do makes one request to the server directly and decodes a 200's body into out.
func (s *Server) do(t testing.TB, token, method, path string, in, out any) int {
	t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	if resp.StatusCode == http.StatusOK && out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotFound {
		t.Logf("%s %s: status %d: %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode
}

// Keyed groups the room's messages from the bot by the delivery key their content carries
// (io.atmost.delivery_key), with their event ids oldest first: redacted ones have lost the key.
func Keyed(events []Event, bot string) map[string][]string {
	out := map[string][]string{}
	for _, e := range events {
		if e.Type != "m.room.message" || e.Sender != bot {
			continue
		}
		if k, ok := e.Content["io.atmost.delivery_key"].(string); ok {
			out[k] = append(out[k], e.EventID)
		}
	}
	return out
}
