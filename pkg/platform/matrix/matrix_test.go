package matrix_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/matrix"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

const (
	room  = "!room:hs.test"
	bot   = "@bot:hs.test"
	token = "syt_the_access_token"
)

// fakeHS is a homeserver of the tests: the send answers what status says (200 stores the
// event), and reads serve the events stored, newest last.
type fakeHS struct {
	*httptest.Server
	mu     sync.Mutex
	status int
	events []map[string]any
	sends  int
}

func newHS(t *testing.T) *fakeHS {
	t.Helper()
	hs := &fakeHS{status: http.StatusOK}
	hs.Server = httptest.NewServer(http.HandlerFunc(hs.serve))
	t.Cleanup(hs.Close)
	return hs
}

func (hs *fakeHS) add(ev map[string]any) string {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	id := "$ev" + strconv.Itoa(len(hs.events))
	ev["event_id"] = id
	if _, ok := ev["room_id"]; !ok {
		ev["room_id"] = room
	}
	if _, ok := ev["type"]; !ok {
		ev["type"] = "m.room.message"
	}
	hs.events = append(hs.events, ev)
	return id
}

func (hs *fakeHS) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+token {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"errcode":"M_UNKNOWN_TOKEN"}`))
		return
	}
	reply := func(status int, v any) {
		b, _ := json.Marshal(v)
		w.WriteHeader(status)
		_, _ = w.Write(b)
	}
	path := r.URL.EscapedPath()
	switch {
	case r.Method == http.MethodPut && strings.Contains(path, "/send/m.room.message/"):
		hs.mu.Lock()
		hs.sends++
		status := hs.status
		hs.mu.Unlock()
		if status != http.StatusOK {
			reply(status, map[string]any{"errcode": "M_FORBIDDEN"})
			return
		}
		var content map[string]any
		_ = json.NewDecoder(r.Body).Decode(&content)
		reply(http.StatusOK, map[string]any{"event_id": hs.add(map[string]any{"sender": bot, "content": content})})
	case strings.Contains(path, "/relations/"):
		id := strings.Split(strings.Split(path, "/relations/")[1], "/")[0]
		id = strings.ReplaceAll(id, "%24", "$")
		var chunk []map[string]any
		hs.mu.Lock()
		for _, ev := range hs.events {
			c, _ := ev["content"].(map[string]any)
			if rel, ok := c["m.relates_to"].(map[string]any); ok && rel["event_id"] == id {
				chunk = append(chunk, ev)
			}
		}
		hs.mu.Unlock()
		reply(http.StatusOK, map[string]any{"chunk": chunk})
	case strings.Contains(path, "/event/"):
		id := strings.ReplaceAll(strings.Split(path, "/event/")[1], "%24", "$")
		hs.mu.Lock()
		defer hs.mu.Unlock()
		for _, ev := range hs.events {
			if ev["event_id"] == id {
				b, _ := json.Marshal(ev)
				w.WriteHeader(http.StatusOK)
				_, _ = w.Write(b)
				return
			}
		}
		reply(404, map[string]any{"errcode": "M_NOT_FOUND"})
	case strings.HasSuffix(path, "/messages"):
		from, _ := strconv.Atoi(r.URL.Query().Get("from"))
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		hs.mu.Lock()
		defer hs.mu.Unlock()
		// Newest first; from counts the events already served.
		var chunk []map[string]any
		for i := len(hs.events) - 1 - from; i >= 0 && len(chunk) < limit; i-- {
			chunk = append(chunk, hs.events[i])
		}
		reply(http.StatusOK, map[string]any{"chunk": chunk, "end": strconv.Itoa(from + len(chunk))})
	default:
		reply(404, map[string]any{"errcode": "M_UNRECOGNIZED"})
	}
}

func open(t *testing.T, hs string, extra map[string]any) platform.Adapter {
	t.Helper()
	t.Setenv("ATMOST_TEST_MATRIX_TOKEN", token)
	s := map[string]any{"homeserver": hs, "room_id": room, "user_id": bot}
	for k, v := range extra {
		s[k] = v
	}
	raw, err := json.Marshal(s)
	require.NoError(t, err)
	ad, err := matrix.Open(platform.Account{ID: "acct-1", Platform: matrix.Name, Settings: raw, CredentialRef: "env:ATMOST_TEST_MATRIX_TOKEN"})
	require.NoError(t, err)
	return ad
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func send(t *testing.T, ad platform.Adapter, r platform.Request) platform.Outcome {
	t.Helper()
	p, err := ad.Prepare(r)
	require.NoError(t, err)
	return ad.Send(ctx(t), p)
}

// The prepared send is a PUT under the transaction id derived from the delivery key, its body
// the content with the key, and no credential anywhere in it.
func TestPrepareRendersTheSendUnderTheKeysTransactionID(t *testing.T) {
	ad := open(t, "http://127.0.0.1:1", nil)
	r := platformtest.Post(t, "acct-1", "hello, room")
	p, err := ad.Prepare(r)
	require.NoError(t, err)
	require.Equal(t, http.MethodPut, p.Method)
	require.Equal(t, "http://127.0.0.1:1/_matrix/client/v3/rooms/%21room:hs.test/send/m.room.message/"+matrix.TxnID(r.Key), p.URL)
	require.JSONEq(t, `{"msgtype":"m.text","body":"hello, room","io.atmost.delivery_key":"`+r.Key.String()+`"}`, string(p.Body))
	require.NotContains(t, p.URL+string(p.Body), token)
	require.Equal(t, "atmost-"+strings.TrimPrefix(r.Key.String(), "dk1:"), matrix.TxnID(r.Key))

	for _, bad := range []platform.Request{
		func() platform.Request { x := r; x.Action = "like"; return x }(),
		func() platform.Request { x := r; x.Target = "!other:hs.test"; return x }(),
		func() platform.Request {
			x := r
			x.Request = json.RawMessage(`{"text":"a","html":"<b>a</b>"}`)
			return x
		}(),
	} {
		_, err := ad.Prepare(bad)
		require.ErrorIs(t, err, platform.ErrUnsendable)
	}
}

// Each status Dendrite answers before its roomserver sees the event proves nothing was made;
// a 409, a 500 and a 200 without an event id prove nothing.
func TestSendClassifiesEachStatus(t *testing.T) {
	hs := newHS(t)
	ad := open(t, hs.URL, nil)
	for status, want := range map[int]platform.Result{
		400: platform.NotSent, 401: platform.NotSent, 403: platform.NotSent, 404: platform.NotSent, 413: platform.NotSent,
		429: platform.NotSent, 409: platform.Unknown, 500: platform.Unknown, 502: platform.Unknown, 200: platform.Sent,
	} {
		hs.mu.Lock()
		hs.status = status
		hs.mu.Unlock()
		out := send(t, ad, platformtest.Post(t, "acct-1", "status "+strconv.Itoa(status)))
		require.Equal(t, want, out.Result, "status %d: %v", status, out.Detail)
	}
	require.Equal(t, []int{400, 401, 403, 404, 413, 429}, matrix.DefinitiveStatuses())
	matrix.DefinitiveStatuses()[0] = 200
	require.Equal(t, 400, matrix.DefinitiveStatuses()[0], "the list is a copy")
}

// A redacted event is the platform's deletion: not found. An edit by its sender is the text it
// holds now; an "edit" by anyone else is none.
func TestReadBackReadsTheLatestEditOfItsSenderAndARedactionAsNotFound(t *testing.T) {
	hs := newHS(t)
	ad := open(t, hs.URL, nil)
	r := platformtest.Post(t, "acct-1", "as sent")
	out := send(t, ad, r)
	require.Equal(t, platform.Sent, out.Result)

	obj, err := ad.ReadBack(ctx(t), r, out.ObjectID)
	require.NoError(t, err)
	require.Equal(t, "as sent", obj.Text)

	edit := func(sender, text string, ts int) {
		hs.add(map[string]any{"sender": sender, "origin_server_ts": ts, "content": map[string]any{
			"body": "* " + text, "m.new_content": map[string]any{"body": text},
			"m.relates_to": map[string]any{"rel_type": "m.replace", "event_id": out.ObjectID}}})
	}
	edit("@mallory:hs.test", "not the sender's edit", 5)
	obj, err = ad.ReadBack(ctx(t), r, out.ObjectID)
	require.NoError(t, err)
	require.Equal(t, "as sent", obj.Text, "an edit by another user is no edit")
	edit(bot, "edited later", 3)
	edit(bot, "edited last", 4)
	obj, err = ad.ReadBack(ctx(t), r, out.ObjectID)
	require.NoError(t, err)
	require.Equal(t, "edited last", obj.Text)

	hs.mu.Lock()
	hs.events[0]["content"] = map[string]any{}
	hs.events[0]["unsigned"] = map[string]any{"redacted_because": map[string]any{"type": "m.room.redaction"}}
	hs.mu.Unlock()
	_, err = ad.ReadBack(ctx(t), r, out.ObjectID)
	require.ErrorIs(t, err, platform.ErrNotFound, "a redacted event is deleted")
}

// An event of another room, sender or key is not the intent's: it reads back as a mismatch.
func TestReadBackOfAnotherEventIsAMismatch(t *testing.T) {
	hs := newHS(t)
	ad := open(t, hs.URL, nil)
	r := platformtest.Post(t, "acct-1", "mine")
	for _, ev := range []map[string]any{
		{"sender": bot, "room_id": "!other:hs.test", "content": map[string]any{"body": "mine", matrix.KeyField: r.Key.String()}},
		{"sender": "@mallory:hs.test", "content": map[string]any{"body": "mine", matrix.KeyField: r.Key.String()}},
		{"sender": bot, "content": map[string]any{"body": "mine", matrix.KeyField: "dk1:00"}},
	} {
		id := hs.add(ev)
		obj, err := ad.ReadBack(ctx(t), r, id)
		require.NoError(t, err)
		require.Contains(t, obj.Text, "is not the one requested", ev)
	}
}

// The lookup finds the bot's message carrying the key beyond the first page; a message by
// anyone else carrying it proves nothing; past the window, or redacted, nothing is found, and
// a not-found never proves not-sent.
func TestLookupFindsOnlyTheBotsMessageWithTheKeyAndNeverProvesNotSent(t *testing.T) {
	hs := newHS(t)
	ad := open(t, hs.URL, map[string]any{"lookup_events": 250})
	r := platformtest.Post(t, "acct-1", "looked up")
	spoof := platformtest.Post(t, "acct-1", "spoofed")
	hs.add(map[string]any{"sender": "@mallory:hs.test", "content": map[string]any{"body": "x", matrix.KeyField: spoof.Key.String()}})
	out := send(t, ad, r)
	for i := range 150 {
		hs.add(map[string]any{"sender": bot, "content": map[string]any{"body": strconv.Itoa(i)}})
	}
	lk := ad.Lookup(ctx(t), r)
	require.Equal(t, platform.Found, lk.Result, lk.Detail)
	require.Equal(t, out.ObjectID, lk.ObjectID)

	lk = ad.Lookup(ctx(t), spoof)
	require.Equal(t, platform.NotFound, lk.Result, "another member's message carrying the key is no proof")
	require.False(t, lk.ProvenNotSent)

	for i := range 150 {
		hs.add(map[string]any{"sender": bot, "content": map[string]any{"body": strconv.Itoa(i)}})
	}
	lk = ad.Lookup(ctx(t), r)
	require.Equal(t, platform.NotFound, lk.Result, "the message is older than the window")
	require.False(t, lk.ProvenNotSent, "not found proves nothing")
	require.Equal(t, 250, lk.Detail["events_searched"])
	require.False(t, ad.Capabilities().StatusLookup)
}

// Settings are checked when the adapter opens; the access token comes only from the credential
// reference.
func TestOpenRefusesBadSettingsAndCredentials(t *testing.T) {
	t.Setenv("ATMOST_TEST_MATRIX_TOKEN", token)
	t.Setenv("ATMOST_TEST_MATRIX_BAD", "two words")
	for _, c := range []struct{ settings, ref string }{
		{`{"homeserver":"http://matrix.example","room_id":"!r:h","user_id":"@b:h"}`, "env:ATMOST_TEST_MATRIX_TOKEN"},
		{`{"homeserver":"https://matrix.example","room_id":"#alias:h","user_id":"@b:h"}`, "env:ATMOST_TEST_MATRIX_TOKEN"},
		{`{"homeserver":"https://matrix.example","room_id":"!r:h","user_id":"b"}`, "env:ATMOST_TEST_MATRIX_TOKEN"},
		{`{"homeserver":"https://matrix.example","room_id":"!r:h","user_id":"@b:h","token":"x"}`, "env:ATMOST_TEST_MATRIX_TOKEN"},
		{`{"homeserver":"https://matrix.example","room_id":"!r:h","user_id":"@b:h","msgtype":"m.emote"}`, "env:ATMOST_TEST_MATRIX_TOKEN"},
		{`{"homeserver":"https://matrix.example","room_id":"!r:h","user_id":"@b:h","lookup_events":0.5}`, "env:ATMOST_TEST_MATRIX_TOKEN"},
		{`{"homeserver":"https://matrix.example","room_id":"!r:h","user_id":"@b:h","reconcile_delay":"-1s"}`, "env:ATMOST_TEST_MATRIX_TOKEN"},
		{`{"homeserver":"https://matrix.example","room_id":"!r:h","user_id":"@b:h"}`, ""},
		{`{"homeserver":"https://matrix.example","room_id":"!r:h","user_id":"@b:h"}`, "env:ATMOST_TEST_MATRIX_BAD"},
	} {
		_, err := matrix.Open(platform.Account{ID: "a", Platform: matrix.Name, Settings: json.RawMessage(c.settings), CredentialRef: c.ref})
		require.Error(t, err, c.settings)
		require.True(t, errors.Is(err, matrix.ErrInvalidSettings), "%s: %v", c.settings, err)
		require.NotContains(t, err.Error(), token)
	}
	_, err := matrix.Open(platform.Account{ID: "a", Platform: matrix.Name, CredentialRef: "env:ATMOST_TEST_MATRIX_TOKEN",
		Settings: json.RawMessage(`{"homeserver":"https://matrix.example/","room_id":"!r:h","user_id":"@b:h","msgtype":"m.notice","lookup_events":5000,"reconcile_delay":"30s"}`)})
	require.NoError(t, err)
}

// A reply (envelope reply_to) names its parent's event in m.relates_to m.in_reply_to; a parent
// object that is not a Matrix event is unsendable.
func TestAReplyNamesItsParentsEvent(t *testing.T) {
	ad := open(t, "http://127.0.0.1:1", nil)
	r := platformtest.Post(t, "acct-1", "and a reply")
	r.Reply = &platform.Reply{Parent: r.Key, ObjectID: "$parent:hs.test"}
	p, err := ad.Prepare(r)
	require.NoError(t, err)
	require.JSONEq(t, `{"msgtype":"m.text","body":"and a reply","io.atmost.delivery_key":"`+r.Key.String()+`",
		"m.relates_to":{"m.in_reply_to":{"event_id":"$parent:hs.test"}}}`, string(p.Body))
	r.Reply.ObjectID = "at://did:plc:x/app.bsky.feed.post/1"
	_, err = ad.Prepare(r)
	require.ErrorIs(t, err, platform.ErrUnsendable)
}
