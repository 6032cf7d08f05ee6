package console_test

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// harness is a console on a real ledger and JetStream (worldtest), served by httptest.
type harness struct {
	*worldtest.World
	t      *testing.T
	srv    *httptest.Server
	token  string
	server *console.Server
	tokens map[string]string // the operators' tokens, by name
}

const testToken = "s3cret-console-token-of-forty-characters"

func newHarness(t *testing.T, token string) *harness {
	t.Helper()
	w := worldtest.New(t)
	for _, id := range []string{"acct-a", "acct-b"} {
		require.NoError(t, w.Ledger.AddAccount(w.Ctx, ledger.Account{ID: id, Platform: "sim", Settings: json.RawMessage(`{"url":"http://127.0.0.1:1"}`)}, ledger.Actor{Name: "test", Reason: "the console's test accounts"}))
	}
	s, err := console.New(console.Config{Ledger: w.Ledger, Token: token, JetStream: w.JS})
	require.NoError(t, err)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &harness{World: w, t: t, srv: srv, token: token, server: s, tokens: map[string]string{}}
}

// parkedNotFound takes one intent of account the whole way a real one goes to parked
// reconcile_not_found: claimed, authorized, an unknown outcome, its one lookup found nothing.
func (h *harness) parkedNotFound(account, text string) identity.DeliveryKey {
	h.t.Helper()
	key := h.Submit(account, text)[0]
	c := h.authorize(key, text)
	_, err := h.Ledger.Complete(h.Ctx, c, ledger.Outcome{Result: ledger.Unknown, Reason: ledger.ReasonSendUnknown, Detail: map[string]any{"error": "timeout after 2s"}})
	require.NoError(h.t, err)
	r, err := h.Ledger.ClaimReconciliation(h.Ctx, key, newClaimToken())
	require.NoError(h.t, err)
	st, err := h.Ledger.ResolveReconciliation(h.Ctx, r, ledger.NotFound, "", map[string]any{"lookup": "no object for the key"})
	require.NoError(h.t, err)
	require.Equal(h.t, ledger.Parked, st)
	h.drain()
	return key
}

// failed takes one intent to failed (connection_failed): nothing was sent.
func (h *harness) failed(account, text string) identity.DeliveryKey {
	h.t.Helper()
	key := h.Submit(account, text)[0]
	c := h.authorize(key, text)
	// Signal ok: the failures are the console's subject, not the account's health, which would
	// hold the account after a few (and refuse the next Begin).
	_, err := h.Ledger.Complete(h.Ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed, Signal: ledger.SignalOK})
	require.NoError(h.t, err)
	h.drain()
	return key
}

// published takes one intent to published, with its object id.
func (h *harness) published(account, text string) identity.DeliveryKey {
	h.t.Helper()
	key := h.Submit(account, text)[0]
	c := h.authorize(key, text)
	_, err := h.Ledger.Complete(h.Ctx, c, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj-" + text, Confirmed: true})
	require.NoError(h.t, err)
	h.drain()
	return key
}

func (h *harness) authorize(key identity.DeliveryKey, text string) ledger.Claim {
	h.t.Helper()
	c, err := h.Ledger.Begin(h.Ctx, key, sha256.Sum256([]byte(text)), time.Minute)
	require.NoError(h.t, err)
	a, err := h.Ledger.Authorize(h.Ctx, c, 2*time.Minute, "")
	require.NoError(h.t, err)
	require.Equal(h.t, ledger.Authorized, a.State, "reason %s", a.Reason)
	return c
}

func (h *harness) drain() {
	h.t.Helper()
	_, err := h.Relay.Drain(h.Ctx)
	require.NoError(h.t, err)
}

// client is a browser-like visitor: a cookie jar, and no redirects followed unless asked.
type client struct {
	h    *harness
	http *http.Client
}

func (h *harness) client() *client {
	jar, err := cookiejar.New(nil)
	require.NoError(h.t, err)
	return &client{h: h, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request and returns the status and body.
func (c *client) do(req *http.Request) (int, string, http.Header) {
	c.h.t.Helper()
	resp, err := c.http.Do(req)
	require.NoError(c.h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.h.t, err)
	return resp.StatusCode, string(b), resp.Header
}

func (c *client) get(path string) (int, string) {
	c.h.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.h.srv.URL+path, nil)
	require.NoError(c.h.t, err)
	code, body, _ := c.do(req)
	return code, body
}

// post sends a form as the console's own page would (same Origin).
func (c *client) post(path string, form url.Values) (int, string, http.Header) {
	c.h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.h.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(c.h.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.h.srv.URL)
	return c.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
var confirmField = regexp.MustCompile(`name="confirm" value="([^"]+)"`)
var seqField = regexp.MustCompile(`name="seq" value="([^"]+)"`)

func field(t *testing.T, re *regexp.Regexp, body string) string {
	t.Helper()
	m := re.FindStringSubmatch(body)
	require.NotNil(t, m, "no %s in:\n%s", re, body)
	return html.UnescapeString(m[1])
}

// operatorToken is the token of the operator name, added with role the first time.
func (h *harness) operatorToken(name string, role ledger.OperatorRole) string {
	h.t.Helper()
	if tok, ok := h.tokens[name]; ok {
		return tok
	}
	tok, err := h.Ledger.AddOperator(h.Ctx, name, role, ledger.Actor{Name: "user:test", Reason: "the console's tests"})
	require.NoError(h.t, err)
	h.tokens[name] = tok
	return tok
}

// login logs in as the operator name (added with role operator the first time) and returns the
// session's CSRF token.
func (c *client) login(name string) string {
	c.h.t.Helper()
	return c.loginWith(c.h.operatorToken(name, ledger.RoleOperator))
}

// loginWith logs in with token and returns the session's CSRF token.
func (c *client) loginWith(token string) string {
	c.h.t.Helper()
	code, body := c.get("/login")
	require.Equal(c.h.t, http.StatusOK, code)
	form := url.Values{"token": {token}, "csrf": {field(c.h.t, csrfField, body)}, "next": {"/"}}
	code, _, hdr := c.post("/login", form)
	require.Equal(c.h.t, http.StatusSeeOther, code, "login")
	require.Equal(c.h.t, "/", hdr.Get("Location"))
	code, body = c.get("/")
	require.Equal(c.h.t, http.StatusOK, code)
	return field(c.h.t, csrfField, body)
}

// preview posts a change's form and returns the confirmation page's confirm id.
func (c *client) preview(path string, form url.Values) (string, string) {
	c.h.t.Helper()
	code, body, _ := c.post(path, form)
	require.Equal(c.h.t, http.StatusOK, code, body)
	return field(c.h.t, confirmField, body), body
}

func values(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func with(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

func history(h *harness, key identity.DeliveryKey) []ledger.Transition {
	h.t.Helper()
	rec, err := h.Ledger.Inspect(h.Ctx, key)
	require.NoError(h.t, err)
	return rec.Transitions
}

var _ = fmt.Sprint

// regexpField matches the value of the hidden field name.
func regexpField(name string) *regexp.Regexp {
	return regexp.MustCompile(`name="` + regexp.QuoteMeta(name) + `" value="([^"]+)"`)
}
