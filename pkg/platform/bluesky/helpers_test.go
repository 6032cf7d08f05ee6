package bluesky_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

// password is an app password that cannot occur by chance in anything the tests look at.
const password = "app-pw-4k2j-NEVER-IN-EVIDENCE"

const passwordEnv = "ATMOST_BLUESKY_TEST_PASSWORD"

const (
	did    = "did:plc:alice7x3kq2m4n5p6"
	handle = "alice.test"
)

// t0 is the tests' clock: createdAt of every record prepared with it.
var t0 = time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.UTC)

// clock is a settable clock.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.set(t)
	return c
}
func (c *clock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *clock) add(d time.Duration) { c.ns.Add(int64(d)) }

func key(t *testing.T, hex string) identity.DeliveryKey {
	t.Helper()
	k, err := identity.ParseDeliveryKey("dk1:" + hex)
	require.NoError(t, err)
	return k
}

// keyN is the n-th test key.
func keyN(t *testing.T, n int) identity.DeliveryKey {
	t.Helper()
	sum := sha256.Sum256([]byte(fmt.Sprint("intent ", n)))
	k, err := identity.DeliveryKeyFromBytes(sum[:])
	require.NoError(t, err)
	return k
}

const (
	postURI  = "at://did:plc:bob2bqz7c4kw/app.bsky.feed.post/3l4abcdefgh22"
	postCID  = "bafyreib2rxk3rh6kzwq7umaa2yhekxvmvbg2b5lfzckfbrcbpnnnvlpxoy"
	rootURI  = "at://did:plc:carol5yhxr3/app.bsky.feed.post/3l3zzzzzzzz22"
	rootCID  = "bafyreid4ogb2fpiwlq3kuw6hx6s2e7tq4kl4cevlu3xbl4k3nmwvrx6f4e"
	bobDID   = "did:plc:bob2bqz7c4kw"
	postText = "Hello, <world> & friends"
)

// request is an intent of acct-1 with the given action, target and request JSON.
func request(t *testing.T, action, target, req string) platform.Request {
	t.Helper()
	var fields struct {
		Text *string `json:"text"`
	}
	_ = json.Unmarshal([]byte(req), &fields) // a malformed request is for Prepare to refuse
	r := platform.Request{Key: keyN(t, 1), Account: "acct-1", Action: action, Target: target, Request: json.RawMessage(req)}
	if fields.Text != nil {
		r.Text = identity.NormalizeText(*fields.Text)
	}
	return r
}

func postRequest(t *testing.T) platform.Request {
	return request(t, "post", "", `{"langs":["en"],"text":"`+postText+`"}`)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func settings(pds string) string {
	return `{"pds":"` + pds + `","identifier":"` + did + `"}`
}

// open opens the adapter for acct-1 against pds, with the test password and clock c.
func open(t *testing.T, pds string, c *clock) platform.Adapter {
	t.Helper()
	t.Setenv(passwordEnv, password)
	ad, err := bluesky.Open(platform.Account{ID: "acct-1", Platform: bluesky.Name, Settings: json.RawMessage(settings(pds)),
		CredentialRef: "env:" + passwordEnv, CredentialVersion: 1})
	require.NoError(t, err)
	bluesky.SetClock(ad, c.now)
	return ad
}

// seen is one request the fake PDS received.
type seen struct {
	Method string // the XRPC method
	HTTP   string // GET or POST
	Query  map[string]string
	Header http.Header
	Body   []byte
}

// fakePDS answers the XRPC calls the adapter makes the way the reference PDS does
// (bluesky-social/atproto packages/pds): sessions with JWTs that expire, createRecord that
// fails with a 500 when the key is taken (its repository tree throws), getRecord that answers
// 400 RecordNotFound. A test can queue other answers per method.
type fakePDS struct {
	*httptest.Server
	t     *testing.T
	clock *clock

	mu       sync.Mutex
	got      []seen
	queued   map[string][]func(w http.ResponseWriter, r *http.Request)
	tokens   int
	access   string
	refresh  string
	records  map[string]storedRecord // at-uri -> record
	created  []string                // at-uris of the records createRecord made, removed ones included
	password string
}

type storedRecord struct {
	CID   string
	Value json.RawMessage
}

func newPDS(t *testing.T, c *clock) *fakePDS {
	p := &fakePDS{t: t, clock: c, queued: map[string][]func(http.ResponseWriter, *http.Request){},
		records: map[string]storedRecord{}, password: password}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

// jwt makes a token whose payload holds exp (unsigned: the adapter only reads exp).
func jwt(kind string, n int, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"ES256K","typ":"at+jwt"}`)) + "." +
		enc([]byte(fmt.Sprintf(`{"scope":%q,"sub":%q,"exp":%d,"n":%d}`, kind, did, exp.Unix(), n))) + ".c2ln"
}

func (p *fakePDS) newTokens() map[string]any {
	p.tokens++
	p.access = jwt("com.atproto.appPass", p.tokens, p.clock.now().Add(2*time.Hour))
	p.refresh = jwt("com.atproto.refresh", p.tokens, p.clock.now().Add(90*24*time.Hour))
	return map[string]any{"accessJwt": p.access, "refreshJwt": p.refresh, "handle": handle, "did": did, "active": true}
}

// on queues an answer for the next call of method.
func (p *fakePDS) on(method string, status int, body string) {
	p.onFunc(method, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})
}

func (p *fakePDS) onFunc(method string, h func(http.ResponseWriter, *http.Request)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queued[method] = append(p.queued[method], h)
}

// expireAccess makes the PDS refuse the access token it issued (its JWT expired early).
func (p *fakePDS) expireAccess() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.access = "expired"
}

func (p *fakePDS) requests() []seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]seen(nil), p.got...)
}

// methods lists the XRPC methods called, in order.
func (p *fakePDS) methods() []string {
	var out []string
	for _, s := range p.requests() {
		out = append(out, s.Method)
	}
	return out
}

func (p *fakePDS) count(method string) int {
	n := 0
	for _, s := range p.requests() {
		if s.Method == method {
			n++
		}
	}
	return n
}

func xrpcErr(w http.ResponseWriter, status int, name, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": name, "message": msg})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (p *fakePDS) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	method := strings.TrimPrefix(r.URL.Path, "/xrpc/")
	q := map[string]string{}
	for k, v := range r.URL.Query() {
		q[k] = v[0]
	}
	p.mu.Lock()
	p.got = append(p.got, seen{Method: method, HTTP: r.Method, Query: q, Header: r.Header.Clone(), Body: body})
	var h func(http.ResponseWriter, *http.Request)
	if hs := p.queued[method]; len(hs) > 0 {
		h, p.queued[method] = hs[0], hs[1:]
	}
	p.mu.Unlock()
	if h != nil {
		r.Body = io.NopCloser(bytes.NewReader(body)) // a queued answer may read the request too
		h(w, r)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	bearer := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	switch method {
	case "com.atproto.server.createSession":
		var in struct{ Identifier, Password string }
		if json.Unmarshal(body, &in) != nil || (in.Identifier != did && in.Identifier != handle) || in.Password != p.password {
			xrpcErr(w, 401, "AuthenticationRequired", "Invalid identifier or password")
			return
		}
		reply(w, p.newTokens())
	case "com.atproto.server.refreshSession":
		if len(body) > 0 {
			xrpcErr(w, 400, "InvalidRequest", "A request body was provided when none was expected")
			return
		}
		if bearer != p.refresh {
			xrpcErr(w, 400, "ExpiredToken", "Token has expired")
			return
		}
		out := p.newTokens()
		delete(out, "active")
		reply(w, out)
	case "com.atproto.repo.createRecord":
		if bearer != p.access {
			xrpcErr(w, 400, "ExpiredToken", "Token has expired")
			return
		}
		status, out := p.store(body)
		if status != http.StatusOK {
			xrpcErr(w, status, out["error"], out["message"])
			return
		}
		reply(w, map[string]any{"uri": out["uri"], "cid": out["cid"], "commit": map[string]string{"cid": "bafyreicommit", "rev": "3l5aaaaaaaa22"}, "validationStatus": "valid"})
	case "com.atproto.repo.getRecord":
		uri := "at://" + q["repo"] + "/" + q["collection"] + "/" + q["rkey"]
		rec, ok := p.records[uri]
		if !ok {
			xrpcErr(w, 400, "RecordNotFound", "Could not locate record: "+uri)
			return
		}
		reply(w, map[string]any{"uri": uri, "cid": rec.CID, "value": rec.Value})
	default:
		xrpcErr(w, 404, "MethodNotImplemented", "Method Not Implemented")
	}
}

// store creates the record a createRecord body describes, as the reference PDS's repository
// does, and answers 200 with its uri and cid, or the XRPC error's status, name and message.
// The caller holds p.mu.
func (p *fakePDS) store(body []byte) (int, map[string]string) {
	var in struct {
		Repo, Collection, Rkey string
		Record                 json.RawMessage
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Repo != did {
		return 400, map[string]string{"error": "InvalidRequest", "message": "Input/repo must be a valid did or a handle"}
	}
	uri := "at://" + did + "/" + in.Collection + "/" + in.Rkey
	if _, ok := p.records[uri]; ok {
		// The reference PDS: the repository tree throws "There is already a value at key",
		// which the XRPC server turns into a 500.
		return 500, map[string]string{"error": "InternalServerError", "message": "Internal Server Error"}
	}
	cid := fmt.Sprintf("bafyrei%040d", len(p.records)+1)
	p.records[uri] = storedRecord{CID: cid, Value: in.Record}
	p.created = append(p.created, uri)
	return 200, map[string]string{"uri": uri, "cid": cid}
}

// put stores a record as if an earlier attempt had created it.
func (p *fakePDS) put(uri, value string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.records[uri] = storedRecord{CID: "bafyreiearlier", Value: json.RawMessage(value)}
}

// remove deletes a record, as the account (com.atproto.repo.deleteRecord), a moderator's
// takedown or the duplicate-backlink rule would: getRecord answers RecordNotFound after it.
func (p *fakePDS) remove(uri string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.records, uri)
}

// recordCount is how many records the PDS holds.
func (p *fakePDS) recordCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.records)
}

// noSecret fails when the password or a token the PDS issued appears in s.
func (p *fakePDS) noSecret(t *testing.T, s string) {
	t.Helper()
	require.NotContains(t, s, password)
	require.NotContains(t, s, "eyJhbGciOiJFUzI1NksiLCJ0eXAiOiJhdCtqd3QifQ", "a session token")
}
