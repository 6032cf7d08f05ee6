package ingest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// apiEnv is a ledger with the accounts acct-1 and acct-2, JetStream, an ingester and its relay
// running as the ingest role runs them, and the HTTP API in front, with one producer token per
// account.
type apiEnv struct {
	*env
	url            string
	token1, token2 string
}

func newAPIEnv(t *testing.T, cfg ingest.HTTPConfig) *apiEnv {
	t.Helper()
	e := newEnv(t)
	e.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-2', 'sim')`)
	token1, err := e.Ledger.AddProducer(e.Ctx, "bot-1", []string{"acct-1", "acct-nobody"}, ledger.Actor{Name: "test", Reason: ""})
	require.NoError(t, err)
	token2, err := e.Ledger.AddProducer(e.Ctx, "bot-2", []string{"acct-2"}, ledger.Actor{Name: "test", Reason: ""})
	require.NoError(t, err)
	api, err := ingest.NewHTTPAPI(e.Ctx, e.JS, e.Ledger, cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(e.Ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = api.Serve(ctx, ln) })
	wg.Go(func() {
		// As the role does: each batch, then its transitions on ATMOST_EVENTS.
		for ctx.Err() == nil {
			_, written, err := e.in.BatchWritten(ctx)
			if !written.Empty() {
				_ = e.Relay.AfterWrite(ctx, written)
			}
			if err != nil && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &apiEnv{env: e, url: "http://" + ln.Addr().String(), token1: token1, token2: token2}
}

type answer struct {
	status int
	body   map[string]any
	raw    string
	header http.Header
}

func (a answer) code() string {
	e, _ := a.body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func (a answer) errField(name string) any {
	e, _ := a.body["error"].(map[string]any)
	return e[name]
}

func (e *apiEnv) do(method, path, token string, body []byte, header ...string) answer {
	e.T.Helper()
	req, err := http.NewRequestWithContext(e.Ctx, method, e.url+path, bytes.NewReader(body))
	require.NoError(e.T, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.T, err)
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		// An event stream never ends by itself: its answer is its status alone.
		return answer{status: resp.StatusCode, header: resp.Header, raw: "an event stream"}
	}
	raw, err := io.ReadAll(resp.Body)
	require.NoError(e.T, err)
	a := answer{status: resp.StatusCode, raw: string(raw), header: resp.Header}
	if len(raw) > 0 {
		require.NoError(e.T, json.Unmarshal(raw, &a.body), "every answer is JSON: %s", raw)
	}
	return a
}

func (e *apiEnv) post(token, body string, header ...string) answer {
	e.T.Helper()
	return e.do(http.MethodPost, "/v1/intents", token, []byte(body), header...)
}

// stored is how many messages ATMOST_INTENTS holds.
func (e *apiEnv) stored() uint64 {
	e.T.Helper()
	s, err := e.JS.Stream(e.Ctx, events.IntentsStream)
	require.NoError(e.T, err)
	info, err := s.Info(e.Ctx)
	require.NoError(e.T, err)
	return info.State.Msgs
}

// outcomeOf polls GET /v1/intents/{key} until it answers 200.
func (e *apiEnv) outcomeOf(token, key string) answer {
	e.T.Helper()
	var a answer
	require.Eventually(e.T, func() bool {
		a = e.do(http.MethodGet, "/v1/intents/"+key, token, nil)
		return a.status == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond, "the intent was never stored")
	return a
}

func bodyKey(t *testing.T, body string) string {
	t.Helper()
	env, err := identity.ParseEnvelope([]byte(body))
	require.NoError(t, err)
	return env.DeliveryKey().String()
}

// A producer posts an envelope, learns its key, and the ingester stores it as it stores a NATS
// producer's message; the same envelope posted again (spelt differently, too) is the same key
// and a duplicate, and the ledger holds one intent. A long poll answers once the intent is
// settled.
func TestAPostedIntentIsStoredOnceAndItsOutcomeAwaited(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, ingest.HTTPConfig{})
	body := post("over http")
	a := e.post(e.token1, body)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, bodyKey(t, body), a.body["delivery_key"])
	require.Equal(t, false, a.body["duplicate"])
	seq := a.body["seq"]
	require.EqualValues(t, 1, seq)

	again := e.post(e.token1, `{"request":{"text":"over http"},"action":"post","account":"acct-1","v":1}`)
	require.Equal(t, http.StatusAccepted, again.status, again.raw)
	require.Equal(t, a.body["delivery_key"], again.body["delivery_key"])
	require.Equal(t, true, again.body["duplicate"])

	out := e.outcomeOf(e.token1, bodyKey(t, body))
	require.Equal(t, "pending", out.body["state"])
	require.Equal(t, "acct-1", out.body["account"])
	require.NotContains(t, out.body, "rejected")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM intents`))
	// Past JetStream's window too: the ledger holds the key, so it is a duplicate.
	replay := e.post(e.token1, body)
	require.Equal(t, true, replay.body["duplicate"])

	// The long poll answers with the settled state once an operator parks it.
	key, err := identity.ParseDeliveryKey(bodyKey(t, body))
	require.NoError(t, err)
	waited := make(chan answer, 1)
	go func() { waited <- e.do(http.MethodGet, "/v1/intents/"+key.String()+"?wait=30s", e.token1, nil) }()
	require.NoError(t, e.Ledger.Park(e.Ctx, key, ledger.Actor{Name: "user:test", Reason: "hold it"}))
	_, err = e.Relay.Drain(e.Ctx)
	require.NoError(t, err)
	w := <-waited
	require.Equal(t, http.StatusOK, w.status, w.raw)
	require.Equal(t, "parked", w.body["state"])
	require.Equal(t, "human", w.body["retry"])
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM intents`))
	require.Zero(t, e.Count(`SELECT count(*) FROM rejects`))
}

// Many producers posting the same envelope at once make one intent, and every one of them is
// told its key.
func TestConcurrentPostsOfOneEnvelopeAreOneIntent(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, ingest.HTTPConfig{})
	body := post("at once")
	var wg sync.WaitGroup
	answers := make([]answer, 16)
	for i := range answers {
		wg.Go(func() { answers[i] = e.post(e.token1, body) })
	}
	wg.Wait()
	fresh := 0
	for _, a := range answers {
		require.Equal(t, http.StatusAccepted, a.status, a.raw)
		require.Equal(t, bodyKey(t, body), a.body["delivery_key"])
		require.EqualValues(t, 1, a.body["seq"], "JetStream stored one copy")
		if a.body["duplicate"] == false {
			fresh++
		}
	}
	require.Equal(t, 1, fresh, "one post stored it; the others were told it is a duplicate")
	e.outcomeOf(e.token1, bodyKey(t, body))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM intents`))
}

// A token acts for its accounts and for no other: it cannot publish for, read the outcome of,
// or stream the events of another account, and a refused publish stores nothing. Another
// account's intent is not found, exactly as a key nobody published.
func TestATokenCannotPublishReadOrStreamAnotherAccount(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, ingest.HTTPConfig{})
	body2 := `{"v":1,"account":"acct-2","action":"post","request":{"text":"for two"}}`
	a := e.post(e.token2, body2)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	e.outcomeOf(e.token2, bodyKey(t, body2))
	seq2 := a.body["seq"]
	before := e.stored()

	for _, body := range []string{
		`{"v":1,"account":"acct-2","action":"post","request":{"text":"sneaky"}}`,
		`{"v":1,"account":"acct-2","action":"post","request":{"text":"sneaky"},"extra":1}`, // invalid, still another's
	} {
		a = e.post(e.token1, body)
		require.Equal(t, http.StatusForbidden, a.status, a.raw)
		require.Equal(t, "account_not_bound", a.code())
	}
	require.Equal(t, before, e.stored(), "a refused publish stores nothing")

	other := e.do(http.MethodGet, "/v1/intents/"+bodyKey(t, body2), e.token1, nil)
	nobody := e.do(http.MethodGet, "/v1/intents/dk1:"+strings.Repeat("0", 64), e.token1, nil)
	require.Equal(t, http.StatusNotFound, other.status, other.raw)
	require.Equal(t, "not_found", other.code())
	require.Equal(t, strings.ReplaceAll(nobody.raw, "dk1:"+strings.Repeat("0", 64), bodyKey(t, body2)), other.raw,
		"another account's intent reads exactly as none")
	waited := e.do(http.MethodGet, "/v1/intents/"+bodyKey(t, body2)+"?seq="+fmt.Sprint(seq2), e.token1, nil)
	require.Equal(t, http.StatusNotFound, waited.status, "nor by its sequence")

	ev := e.do(http.MethodGet, "/v1/accounts/acct-2/events", e.token1, nil)
	require.Equal(t, http.StatusForbidden, ev.status, ev.raw)
	require.Equal(t, "account_not_bound", ev.code())
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM intents`))
}

// No token, a malformed one, an unknown one and a revoked one are 401 on every route; a
// revoked token's open event stream ends, with the end of its chunked transfer, though its
// last write's deadline had passed (keep-alives further apart than the write timeout, as the
// defaults are: 15 s and 10 s).
func TestARevokedOrUnknownTokenIsRefused(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, ingest.HTTPConfig{KeepAlive: 300 * time.Millisecond, StreamWriteTimeout: 100 * time.Millisecond})
	stream := e.openEvents(e.token1, "acct-1", "")

	_, err := e.Ledger.RevokeProducer(e.Ctx, "bot-1", ledger.Actor{Name: "user:test", Reason: "leaked"})
	require.NoError(t, err)
	before := e.stored()
	for _, token := range []string{"", "nonsense", ledger.ProducerTokenPrefix + strings.Repeat("A", 43), e.token1} {
		for _, a := range []answer{
			e.post(token, post("after the revocation")),
			e.do(http.MethodGet, "/v1/intents/dk1:"+strings.Repeat("0", 64), token, nil),
			e.do(http.MethodGet, "/v1/accounts/acct-1/events", token, nil),
		} {
			require.Equal(t, http.StatusUnauthorized, a.status, "%q: %s", token, a.raw)
			require.Equal(t, "unauthorized", a.code())
			require.Contains(t, a.header.Get("WWW-Authenticate"), "Bearer")
		}
	}
	require.Equal(t, before, e.stored())
	// The stream opened before the revocation ends at its next keep-alive (300 ms here; the
	// bound only keeps a stream that never ends from hanging the test), and ends cleanly: a
	// transfer cut short is an error here (unexpected EOF).
	ended := make(chan error, 1)
	go func() { _, err := io.ReadAll(stream.Body); ended <- err }()
	select {
	case err := <-ended:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the revoked token's event stream is still open")
	}
	a := e.post(e.token2, `{"v":1,"account":"acct-2","action":"post","request":{"text":"two still works"}}`)
	require.Equal(t, http.StatusAccepted, a.status, "the other producer's token still works")
}

// Every refusal of an envelope is the reject reason ingest gives the same message on NATS, with
// its status, answered synchronously and stored as a reject at the sequence the answer names.
// A body over the body limit is refused and stores nothing. A good envelope between them is
// stored: nothing is lost.
func TestRefusalsAreTheRejectReasonsAndAreStored(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, ingest.HTTPConfig{})
	good := post("fine")
	cases := []struct {
		reason identity.Reason
		status int
		body   string
		header []string
	}{
		{identity.ReasonMalformedJSON, 400, `{"v":1,`, nil},
		{identity.ReasonNotObject, 400, `[1,2]`, nil},
		{identity.ReasonDuplicateField, 400, `{"v":1,"v":1,"account":"acct-1","action":"post","request":{}}`, nil},
		{identity.ReasonInvalidUTF8, 400, "{\"v\":1,\"account\":\"acct-1\",\"action\":\"post\",\"request\":{\"text\":\"\xff\"}}", nil},
		{identity.ReasonUnknownField, 422, `{"v":1,"account":"acct-1","action":"post","request":{},"send_twice":true}`, nil},
		{identity.ReasonMissingField, 422, `{"v":1,"account":"acct-1","request":{}}`, nil},
		{identity.ReasonUnsupportedVersion, 422, `{"v":2,"account":"acct-1","action":"post","request":{}}`, nil},
		{identity.ReasonInvalidAction, 422, `{"v":1,"account":"acct-1","action":"Post!","request":{}}`, nil},
		{identity.ReasonInvalidRequest, 422, `{"v":1,"account":"acct-1","action":"post","request":"text"}`, nil},
		{identity.ReasonTooLarge, 413, post(strings.Repeat("x", identity.MaxEnvelopeBytes)), nil},
		{identity.ReasonInvalidKeyHeader, 400, good, []string{identity.DeliveryKeyHeader, "not-a-key"}},
		{identity.ReasonKeyMismatch, 422, good, []string{identity.DeliveryKeyHeader, "dk1:" + strings.Repeat("0", 64)}},
		{identity.ReasonUnknownAccount, 422, `{"v":1,"account":"acct-nobody","action":"post","request":{"text":"early"}}`, nil},
	}
	for _, c := range cases {
		a := e.post(e.token1, c.body, c.header...)
		require.Equal(t, c.status, a.status, "%s: %s", c.reason, a.raw)
		require.Equal(t, string(c.reason), a.code(), a.raw)
		seq, ok := a.errField("seq").(float64)
		require.True(t, ok, "%s: the answer names the stored message: %s", c.reason, a.raw)
		require.Eventually(t, func() bool {
			return e.Count(`SELECT count(*) FROM rejects WHERE stream_seq = $1 AND reason = $2`, int64(seq), string(c.reason)) == 1
		}, 20*time.Second, 20*time.Millisecond, "%s: stored as a reject at %v", c.reason, seq)
	}
	rejects := e.Count(`SELECT count(*) FROM rejects`)
	require.Equal(t, len(cases), rejects)

	before := e.stored()
	huge := e.post(e.token1, post(strings.Repeat("x", ingest.HTTPMaxBody)))
	require.Equal(t, http.StatusRequestEntityTooLarge, huge.status, huge.raw)
	require.Equal(t, string(identity.ReasonTooLarge), huge.code())
	require.Nil(t, huge.errField("seq"), "nothing was stored")
	require.Equal(t, before, e.stored())

	a := e.post(e.token1, good)
	require.Equal(t, http.StatusAccepted, a.status, "the envelope a refused header came with is taken on its own: %s", a.raw)
	e.outcomeOf(e.token1, bodyKey(t, good))

	// The account is added: the same envelope posted again is taken (not dropped as the copy of
	// the refused message), and the refusal's remedy said so.
	e.Exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-nobody', 'sim')`)
	early := `{"v":1,"account":"acct-nobody","action":"post","request":{"text":"early"}}`
	a = e.post(e.token1, early)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	require.Equal(t, "pending", e.outcomeOf(e.token1, bodyKey(t, early)).body["state"])
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM intents`))
	require.Equal(t, rejects, e.Count(`SELECT count(*) FROM rejects`))
}

// The refusal of a message ingest stored as a reject is read with the sequence the POST named.
func TestTheOutcomeOfARefusedMessageIsItsRejection(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, ingest.HTTPConfig{})
	body := `{"v":1,"account":"acct-nobody","action":"post","request":{"text":"who"}}`
	key := bodyKey(t, body)
	a := e.post(e.token1, body, identity.DeliveryKeyHeader, key)
	require.Equal(t, http.StatusUnprocessableEntity, a.status, a.raw)
	require.NotEmpty(t, a.errField("remedy"))
	require.Equal(t, key, a.errField("delivery_key"))
	out := e.do(http.MethodGet, fmt.Sprintf("/v1/intents/%s?seq=%v", key, a.errField("seq")), e.token1, nil)
	require.Equal(t, http.StatusOK, out.status, out.raw)
	rejected := out.body["rejected"].(map[string]any)
	require.Equal(t, "unknown_account", rejected["reason"])
	require.NotContains(t, out.body, "state", "no zero values")
}

// Bad paths, queries and methods are JSON refusals too.
func TestBadRequestsAreJSONRefusals(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, ingest.HTTPConfig{})
	for _, c := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodGet, "/v1/intents/not-a-key", 400, "invalid_key"},
		{http.MethodGet, "/v1/intents/dk1:" + strings.Repeat("0", 64) + "?wait=2m", 400, "invalid_wait"},
		{http.MethodGet, "/v1/intents/dk1:" + strings.Repeat("0", 64) + "?wait=soon", 400, "invalid_wait"},
		{http.MethodGet, "/v1/intents/dk1:" + strings.Repeat("0", 64) + "?seq=-1", 400, "invalid_seq"},
		{http.MethodGet, "/v1/intents/dk1:" + strings.Repeat("0", 64), 404, "not_found"},
		{http.MethodGet, "/v1/intents", 405, "method_not_allowed"},
		{http.MethodDelete, "/v1/intents/dk1:" + strings.Repeat("0", 64), 404, "not_found"},
		{http.MethodDelete, "/v1/intents/not-a-key", 400, "invalid_key"},
		{http.MethodPut, "/v1/intents/dk1:" + strings.Repeat("0", 64), 405, "method_not_allowed"},
		{http.MethodGet, "/v2/things", 404, "not_found"},
	} {
		a := e.do(c.method, c.path, e.token1, nil)
		require.Equal(t, c.status, a.status, "%s %s: %s", c.method, c.path, a.raw)
		require.Equal(t, c.code, a.code(), "%s %s", c.method, c.path)
		require.Equal(t, "application/json", a.header.Get("Content-Type"))
	}
	// The head's bound is the documented one to the byte: net/http alone would take 4 KiB more.
	require.Equal(t, http.StatusNotFound, e.headStatus(ingest.HTTPMaxHeader), "a head of exactly the limit is served")
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, e.headStatus(ingest.HTTPMaxHeader+1), "one byte more is refused")
	req, err := http.NewRequestWithContext(e.Ctx, http.MethodGet, e.url+"/v1/intents/dk1:"+strings.Repeat("0", 64), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.token1)
	req.Header.Set("X-Padding", strings.Repeat("x", 2*ingest.HTTPMaxHeader))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
}

// headStatus sends, on a connection of its own, a GET of a key nobody published whose head
// (request line, headers, their line ends and the blank line) is n bytes, and returns the
// answer's status.
func (e *apiEnv) headStatus(n int) int {
	e.T.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	require.NoError(e.T, err)
	defer conn.Close()
	head := "GET /v1/intents/dk1:" + strings.Repeat("0", 64) + " HTTP/1.1\r\nHost: atmost\r\nAuthorization: Bearer " + e.token1 + "\r\nX-Padding: "
	const end = "\r\n\r\n"
	_, err = io.WriteString(conn, head+strings.Repeat("x", n-len(head)-len(end))+end)
	require.NoError(e.T, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(e.T, err)
	resp.Body.Close()
	return resp.StatusCode
}

// openEvents opens the account's event stream and requires it to start.
func (e *apiEnv) openEvents(token, account, lastEventID string) *http.Response {
	e.T.Helper()
	req, err := http.NewRequestWithContext(e.Ctx, http.MethodGet, e.url+"/v1/accounts/"+url.PathEscape(account)+"/events", nil)
	require.NoError(e.T, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.T, err)
	e.T.Cleanup(func() { resp.Body.Close() })
	require.Equal(e.T, http.StatusOK, resp.StatusCode)
	require.Equal(e.T, "text/event-stream", resp.Header.Get("Content-Type"))
	return resp
}

type sse struct {
	id, event string
	data      events.Event
	comments  int
}

// nextEvent reads the stream up to its next event, counting the comments on the way.
func nextEvent(t *testing.T, r *bufio.Reader) sse {
	t.Helper()
	var ev sse
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.id != "" {
				return ev
			}
		case strings.HasPrefix(line, ":"):
			ev.comments++
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var err error
			ev.data, err = events.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")))
			require.NoError(t, err)
		}
	}
}

// An account's event stream carries each transition of its intents (and none of another
// account's), with its stream sequence as id and keep-alive comments between; reconnecting with
// Last-Event-ID resumes after that event. The streams one token holds open are bounded.
func TestTheEventStreamResumesAfterTheLastEventID(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, ingest.HTTPConfig{KeepAlive: 50 * time.Millisecond, MaxStreams: 2})
	stream := e.openEvents(e.token1, "acct-1", "")
	r := bufio.NewReader(stream.Body)

	other := e.post(e.token2, `{"v":1,"account":"acct-2","action":"post","request":{"text":"not yours"}}`)
	require.Equal(t, http.StatusAccepted, other.status)
	e.outcomeOf(e.token2, other.body["delivery_key"].(string))
	body := post("follow me")
	require.Equal(t, http.StatusAccepted, e.post(e.token1, body).status)
	first := nextEvent(t, r)
	require.Equal(t, "pending", first.event)
	require.Equal(t, bodyKey(t, body), first.data.DeliveryKey.String())
	require.Equal(t, "acct-1", first.data.Account)
	require.NotEqual(t, "1", first.id, "the other account's event came first on the stream, and is not in this one")

	// The third stream of one token is refused while two are open.
	second := e.openEvents(e.token1, "acct-1", "")
	third := e.do(http.MethodGet, "/v1/accounts/acct-1/events", e.token1, nil)
	require.Equal(t, http.StatusTooManyRequests, third.status, third.raw)
	require.Equal(t, "too_many_streams", third.code())
	second.Body.Close()

	stream.Body.Close()
	key, err := identity.ParseDeliveryKey(bodyKey(t, body))
	require.NoError(t, err)
	require.NoError(t, e.Ledger.Park(e.Ctx, key, ledger.Actor{Name: "user:test", Reason: "while away"}))
	_, err = e.Relay.Drain(e.Ctx)
	require.NoError(t, err)

	var resumed *http.Response
	require.Eventually(t, func() bool {
		// The closed streams are released once their handlers see the close.
		req, _ := http.NewRequestWithContext(e.Ctx, http.MethodGet, e.url+"/v1/accounts/acct-1/events", nil)
		req.Header.Set("Authorization", "Bearer "+e.token1)
		req.Header.Set("Last-Event-ID", first.id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			if resp != nil {
				resp.Body.Close()
			}
			return false
		}
		resumed = resp
		return true
	}, 10*time.Second, 20*time.Millisecond)
	defer resumed.Body.Close()
	r = bufio.NewReader(resumed.Body)
	next := nextEvent(t, r)
	require.Equal(t, "parked", next.event)
	require.EqualValues(t, 2, next.data.Seq)
	require.Greater(t, next.id, first.id)
	idle := nextEventOrComments(t, r, 2)
	require.GreaterOrEqual(t, idle, 2, "keep-alive comments while nothing happens")

	bad := e.do(http.MethodGet, "/v1/accounts/acct-1/events", e.token2, nil, "Last-Event-ID", "x")
	require.Equal(t, http.StatusForbidden, bad.status)
	bad = e.do(http.MethodGet, "/v1/accounts/acct-2/events", e.token2, nil, "Last-Event-ID", "x")
	require.Equal(t, http.StatusBadRequest, bad.status)
	require.Equal(t, "invalid_last_event_id", bad.code())
}

// nextEventOrComments reads until it has seen n comments, and returns how many it saw.
func nextEventOrComments(t *testing.T, r *bufio.Reader, n int) int {
	t.Helper()
	seen := 0
	for seen < n {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		if strings.HasPrefix(line, ": keep-alive") {
			seen++
		}
	}
	return seen
}

// Every route the API serves is in docs/http-api.yaml, and every operation there is served.
func TestEveryRouteIsInTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../../docs/http-api.yaml")
	require.NoError(t, err)
	var doc struct {
		OpenAPI string                               `yaml:"openapi"`
		Paths   map[string]map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(data, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	served := slices.Clone(ingest.Routes)
	slices.Sort(served)
	slices.Sort(documented)
	require.Equal(t, served, documented)
	text := string(data)
	for _, limit := range []string{fmt.Sprint(ingest.HTTPMaxBody), fmt.Sprint(ingest.HTTPMaxHeader), fmt.Sprintf("%ds", int(ingest.HTTPMaxWait.Seconds())),
		fmt.Sprintf("at most %d event streams", ingest.HTTPMaxStreams), fmt.Sprintf("every %d s", int(ingest.HTTPKeepAlive.Seconds()))} {
		require.Contains(t, text, limit, "the document states the limit the code holds")
	}
}

// DELETE /v1/intents/{key} parks the token's own intent cancelled while it is not yet
// authorized, answers the same when repeated, and treats another account's intent as none.
func TestDeleteCancelsTheTokensOwnIntent(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, ingest.HTTPConfig{})
	body := `{"v":1,"account":"acct-1","action":"post","request":{"text":"cancel over http"},"not_before":"2099-01-01T00:00:00Z"}`
	a := e.post(e.token1, body)
	require.Equal(t, http.StatusUnprocessableEntity, a.status, "not_before beyond 30 days: %s", a.raw)
	require.Equal(t, "invalid_time", a.code())

	body = `{"v":1,"account":"acct-1","action":"post","request":{"text":"cancel over http"}}`
	a = e.post(e.token1, body)
	require.Equal(t, http.StatusAccepted, a.status, a.raw)
	key := bodyKey(t, body)
	e.outcomeOf(e.token1, key)

	other := e.do(http.MethodDelete, "/v1/intents/"+key, e.token2, nil)
	require.Equal(t, http.StatusNotFound, other.status, other.raw)
	require.Equal(t, "pending", e.outcomeOf(e.token1, key).body["state"])

	for range 2 {
		c := e.do(http.MethodDelete, "/v1/intents/"+key, e.token1, nil)
		require.Equal(t, http.StatusOK, c.status, c.raw)
		require.Equal(t, true, c.body["cancelled"])
		require.Equal(t, "parked", c.body["state"])
		require.Equal(t, "cancelled", c.body["reason"])
	}
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM history WHERE reason = 'cancelled' AND actor = 'bot-1'`))
}
