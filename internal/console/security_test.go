package console_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/pkg/ledger"
)

// clock is a test's time, moved by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// observed is a console on h's ledger whose logs, metrics and clock the test reads.
type observed struct {
	s     *console.Server
	logs  *observer.ObservedLogs
	reg   *prometheus.Registry
	clock *clock
}

func (h *harness) observed(cfg console.Config) *observed {
	h.t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	reg := prometheus.NewRegistry()
	cfg.Ledger, cfg.Logger, cfg.Registerer = h.Ledger, zap.New(core), reg
	s, err := console.New(cfg)
	require.NoError(h.t, err)
	c := &clock{now: time.Now()}
	console.SetClock(s, c.Now)
	return &observed{s: s, logs: logs, reg: reg, clock: c}
}

// serve sends r to the console from client (an IP address) and returns the answer.
func (o *observed) serve(r *http.Request, client string) *httptest.ResponseRecorder {
	r.RemoteAddr = client + ":40000"
	w := httptest.NewRecorder()
	o.s.ServeHTTP(w, r)
	return w
}

func (o *observed) logins(how, result string) float64 {
	mfs, err := o.reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "atmost_console_logins_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["how"] == how && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func bearerGet(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/intents", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	return r
}

// Wrong tokens are throttled per client, through the Bearer header and the login form alike:
// after clientGuesses wrong ones the client is refused with 429 before its token is compared,
// so even the right token does not get in until a guess comes back. Each wrong token and each
// refusal is a log line and a count of atmost_console_logins_total.
func TestWrongTokensAreThrottledPerClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	o := h.observed(console.Config{Token: testToken})
	const mallory, alice = "192.0.2.7", "192.0.2.8"
	for i := range 5 {
		require.Equal(t, http.StatusUnauthorized, o.serve(bearerGet(fmt.Sprintf("guess-%d", i)), mallory).Code)
	}
	w := o.serve(bearerGet(testToken), mallory)
	require.Equal(t, http.StatusTooManyRequests, w.Code, "the right token, from a client out of guesses")
	require.NotContains(t, w.Body.String(), "acct-a")

	// The login form of that client is refused as well, before its token is read.
	form := url.Values{"operator": {"mallory"}, "token": {testToken}, "csrf": {"c"}, "next": {"/"}}
	r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(&http.Cookie{Name: "atmost_console_login", Value: "c"})
	w = o.serve(r, mallory)
	require.Equal(t, http.StatusTooManyRequests, w.Code)
	for _, c := range w.Result().Cookies() {
		require.NotEqual(t, "atmost_console", c.Name, "no session")
	}

	require.Equal(t, http.StatusOK, o.serve(bearerGet(testToken), alice).Code, "another client is not held")
	o.clock.Add(time.Minute)
	require.Equal(t, http.StatusOK, o.serve(bearerGet(testToken), mallory).Code, "a guess comes back after a minute")

	require.Equal(t, 5.0, o.logins("bearer", "wrong"))
	require.Equal(t, 1.0, o.logins("bearer", "throttled"))
	require.Equal(t, 1.0, o.logins("form", "throttled"))
	require.Equal(t, 2.0, o.logins("bearer", "ok"))
	require.Equal(t, 5, o.logs.FilterMessage("login refused: wrong token").FilterField(zap.String("client", mallory)).Len())
	require.Equal(t, 2, o.logs.FilterMessage("login throttled").Len())
}

// Wrong tokens are throttled in all too: many clients, each with a guess or two, spend the
// console's guesses, and then a right token from a client never seen is refused as well.
func TestWrongTokensAreThrottledInAll(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	o := h.observed(console.Config{Token: testToken})
	for i := range 100 {
		require.Equal(t, http.StatusUnauthorized, o.serve(bearerGet("guess"), fmt.Sprintf("198.51.100.%d", i)).Code)
	}
	require.Equal(t, http.StatusTooManyRequests, o.serve(bearerGet(testToken), "203.0.113.1").Code)
	require.Equal(t, 1, o.logs.FilterMessage("login throttled").FilterField(zap.String("limit", "total")).Len())
	o.clock.Add(2 * time.Second)
	require.Equal(t, http.StatusOK, o.serve(bearerGet(testToken), "203.0.113.1").Code)
}

// A token that can be guessed is refused at start, naming how to make one.
func TestAWeakTokenIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	for _, weak := range []string{"a", "s3cret", strings.Repeat("ab", 20), "correct horse battery staple one two three"} {
		require.ErrorContains(t, console.CheckToken(weak), "openssl rand -base64 32", weak)
		_, err := console.New(console.Config{Ledger: &ledger.Ledger{}, Token: weak})
		require.ErrorContains(t, err, "too weak", weak)
	}
	require.NoError(t, console.CheckToken(testToken))
}

// A session ends after IdleTimeout unused, and SessionLifetime after its login however busy.
func TestASessionEndsWhenIdleAndAtItsLifetime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	o := h.observed(console.Config{Token: testToken, IdleTimeout: 30 * time.Minute})
	srv := httptest.NewServer(o.s)
	t.Cleanup(srv.Close)
	h2 := *h
	h2.srv = srv
	c := h2.client()
	c.login("alice")

	o.clock.Add(29 * time.Minute)
	code, _ := c.get("/")
	require.Equal(t, http.StatusOK, code, "used within the idle timeout")
	o.clock.Add(31 * time.Minute)
	code, _ = c.get("/")
	require.Equal(t, http.StatusSeeOther, code, "idle for longer than the timeout")

	c.login("alice")
	for range 12*3 + 1 {
		o.clock.Add(20 * time.Minute)
		code, _ = c.get("/")
		if code != http.StatusOK {
			break
		}
	}
	require.Equal(t, http.StatusSeeOther, code, "ended at its lifetime, though used every 20 minutes")
}

// Every request is bounded before anyone is known: a multipart body (which Go would spool to
// disk) is refused unread, a body over MaxBody is cut off, headers over MaxHeaderBytes are
// refused, and a body that trickles in is cut off at the read timeout.
func TestARequestIsBoundedBeforeAuthentication(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	running, err := console.Listen(h.Ctx, console.Config{Ledger: h.Ledger, Token: testToken, ReadTimeout: time.Second}, "127.0.0.1:0", "", "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = running.Stop() })
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", "big")
	_, _ = fw.Write(bytes.Repeat([]byte("x"), 1<<20))
	_ = mw.Close()
	resp, err := hc.Post(running.URL+"/login", mw.FormDataContentType(), &body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)

	big := "operator=" + strings.Repeat("a", console.MaxBody)
	resp, err = hc.Post(running.URL+"/login", "application/x-www-form-urlencoded", strings.NewReader(big))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	req, _ := http.NewRequest(http.MethodGet, running.URL+"/login", nil)
	req.Header.Set("X-Padding", strings.Repeat("p", 2*console.MaxHeaderBytes))
	resp, err = hc.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)

	// A body sent a byte every 200 ms: the connection is closed at the read timeout (1 s), long
	// before the body's 100 bytes would have arrived (20 s).
	u, _ := url.Parse(running.URL)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /login HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n", u.Host)
	require.NoError(t, err)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, bufio.NewReader(conn))
	}()
	sent := 0
	for sent < 100 {
		select {
		case <-closed:
		case <-time.After(200 * time.Millisecond):
			if _, err := conn.Write([]byte("a")); err == nil {
				sent++
				continue
			}
		}
		break
	}
	require.Less(t, sent, 100, "the server waited for the whole trickled body")
}

// A note, a reason or any field the ledger would not store is refused with 400 (a NUL, a
// control character, bytes that are not UTF-8) or 422 (more than ledger.MaxNote characters),
// in a clear sentence, and nothing changes; the same note within the limits is previewed.
func TestFieldsTheLedgerWillNotStoreAreRefusedClearly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.failed("acct-a", "a note for it")
	c := h.client()
	csrf := c.login("alice")
	path := "/intents/" + key.String() + "/act"
	post := func(path, rawForm string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(rawForm))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", h.srv.URL)
		code, body, _ := c.do(req)
		return code, body
	}
	base := "csrf=" + url.QueryEscape(csrf) + "&verb=park&note="
	for note, want := range map[string]int{
		url.QueryEscape(strings.Repeat("é", ledger.MaxNote+1)): http.StatusUnprocessableEntity,
		"stop%00now": http.StatusBadRequest,
		"stop%1Bnow": http.StatusBadRequest,
		"stop%FFnow": http.StatusBadRequest,
	} {
		code, body := post(path, base+note)
		require.Equal(t, want, code, body)
		require.Contains(t, body, "nothing was changed")
		require.NotContains(t, body, "SQLSTATE")
	}
	code, body := post("/controls/switch", "csrf="+url.QueryEscape(csrf)+"&scope=_global&engaged=on&note="+strings.Repeat("x", ledger.MaxNote+1))
	require.Equal(t, http.StatusUnprocessableEntity, code, body)
	require.Equal(t, ledger.Failed, h.Intent(key).State)
	sw, err := h.Ledger.Switches(h.Ctx)
	require.NoError(t, err)
	require.Empty(t, sw)

	code, body = post(path, base+url.QueryEscape(strings.Repeat("é", ledger.MaxNote-2)+"\r\n"))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `name="confirm"`)
}

// The assets are files, never a listing of their directory.
func TestTheAssetsListNoDirectory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	c := h.client()
	code, body := c.get("/assets/")
	require.Equal(t, http.StatusNotFound, code)
	require.NotContains(t, body, "console.css")
	code, _ = c.get("/assets/console.css")
	require.Equal(t, http.StatusOK, code)

	// The icon, named by every page and where a browser looks by itself, before any login.
	_, body = c.get("/login")
	require.Contains(t, body, `<link rel="icon" href="/assets/favicon.svg"`)
	req, err := http.NewRequest(http.MethodGet, h.srv.URL+"/favicon.ico", nil)
	require.NoError(t, err)
	code, body, hdr := c.do(req)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "image/svg+xml", hdr.Get("Content-Type"))
	require.Contains(t, body, "<svg")
}

// The login sends a person only to a path of this console: next values a browser would read
// as another host go to the overview.
func TestTheLoginSendsOnlyToAPathOfItsOwn(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	for next, want := range map[string]string{"/\\evil.example/phish.html": "/", "/%09/evil": "/", "//evil.example": "/",
		"/intents?state=parked": "/intents?state=parked"} {
		c := h.client()
		_, body := c.get("/login")
		code, _, hdr := c.post("/login", values("operator", "alice", "token", testToken, "csrf", field(t, csrfField, body), "next", next))
		require.Equal(t, http.StatusSeeOther, code)
		require.Equal(t, want, hdr.Get("Location"), next)
	}
}

// Every login, refusal and change is logged with who, from where, what, on which intent, and
// the result.
func TestLoginsRefusalsAndChangesAreLogged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.failed("acct-a", "logged")
	o := h.observed(console.Config{Token: testToken, JetStream: h.JS})
	srv := httptest.NewServer(o.s)
	t.Cleanup(srv.Close)
	h2 := *h
	h2.srv = srv
	c := h2.client()
	csrf := c.login("alice")
	require.Equal(t, 1, o.logs.FilterMessage("login").FilterField(zap.String("actor", "console:alice")).Len())

	path := "/intents/" + key.String() + "/act"
	form := values("csrf", csrf, "verb", "park", "note", "stop it")
	confirm, body := c.preview(path, form)
	code, _, _ := c.post(path, with(form, "confirm", confirm, "seq", field(t, seqField, body)))
	require.Equal(t, http.StatusSeeOther, code)
	changes := o.logs.FilterMessage("change").FilterField(zap.String("target", key.String()))
	require.Equal(t, 1, changes.Len())
	f := changes.All()[0].ContextMap()
	require.Equal(t, "console:alice", f["actor"])
	require.Equal(t, "park", f["action"])
	require.Equal(t, "done", f["result"])

	code, _, _ = c.post(path, with(form, "csrf", "forged"))
	require.Equal(t, http.StatusForbidden, code)
	require.Equal(t, 1, o.logs.FilterMessage("change refused").Len())
}

// Hostile requests, on every route and method, signed in and not: sizes, encodings, NULs,
// odd methods. None is answered with a server error, and none changes the ledger (none
// carries a confirmation its preview issued).
func TestHostileRequestsNeitherFailNorChangeTheLedger(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	failed := h.failed("acct-a", "hostile target")
	parked := h.parkedNotFound("acct-b", "hostile parked")
	c := h.client()
	csrf := c.login("alice")
	paths := []string{"/", "/login", "/logout", "/intents", "/intents/" + failed.String(), "/intents/" + parked.String() + "/act",
		"/intents/%00/act", "/bulk", "/rejects", "/rejects/replay", "/controls", "/controls/switch", "/controls/policy",
		"/overview/live", "/assets/", "/assets/../../etc/passwd", "/%2e%2e/%2e%2e/"}
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead, http.MethodOptions, "PROPFIND"}
	fields := []string{"verb", "note", "to", "object_id", "seq", "confirm", "scope", "engaged", "state", "reason", "account", "q",
		"since", "until", "operator", "token", "next", "attempt_cap", "retryable_reasons", "per", "id"}
	hostile := []string{"", "%00", "%FF%FE", "%C0%AF", strings.Repeat("A", 2000), "park", "resolve", "retry", "failed", "published",
		"on", "off", "_global", "acct-a", "-1", "99999999999999999999", "%E2%80%AE", "../..", "<script>", "1e309", "NaN", "%0D%0A",
		"resolve-failed", parked.String(), failed.String()}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	before, err := h.Ledger.ControlHistory(h.Ctx, "", 1000)
	require.NoError(t, err)
	for range 400 {
		var form strings.Builder
		if rng.IntN(2) == 0 {
			form.WriteString("csrf=" + url.QueryEscape(csrf))
		}
		for range rng.IntN(6) {
			fmt.Fprintf(&form, "&%s=%s", pick(fields), pick(hostile))
		}
		method, path := pick(methods), pick(paths)
		req, err := http.NewRequestWithContext(context.Background(), method, h.srv.URL+path+"?"+strings.TrimPrefix(form.String(), "&"), strings.NewReader(form.String()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", pick([]string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain", ""}))
		if rng.IntN(3) == 0 {
			req.Header.Set("Origin", h.srv.URL)
		}
		code, body, _ := c.do(req)
		require.Less(t, code, 500, "%s %s %s: %s", method, path, form.String(), body)
	}
	require.Equal(t, ledger.Failed, h.Intent(failed).State)
	require.Equal(t, ledger.Parked, h.Intent(parked).State)
	after, err := h.Ledger.ControlHistory(h.Ctx, "", 1000)
	require.NoError(t, err)
	require.Equal(t, len(before), len(after))
}
