package console_test

import (
	"crypto/sha256"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// A visitor without a session is sent to the login page from every page, and no page, the
// login included, shows a byte of the ledger; a change without a session changes nothing.
func TestAVisitorWithoutASessionSeesNothingOfTheLedger(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.parkedNotFound("acct-b", "secret text of a parked intent")
	c := h.client()
	for _, path := range []string{"/", "/intents?state=parked", "/intents/" + key.String(), "/controls", "/rejects", "/bulk", "/overview/live", "/events"} {
		code, body := c.get(path)
		require.Equal(t, http.StatusSeeOther, code, path)
		for _, secret := range []string{key.String(), "acct-b", "secret text", "reconcile_not_found"} {
			require.NotContains(t, body, secret, path)
		}
	}
	_, body := c.get("/login")
	require.NotContains(t, body, "acct-b")
	require.NotContains(t, body, "parked")

	code, _, _ := c.post("/intents/"+key.String()+"/act", values("verb", "resolve", "to", "failed", "note", "forged"))
	require.Equal(t, http.StatusUnauthorized, code)
	require.Equal(t, ledger.Parked, h.Intent(key).State)

	// A wrong token is no login, and a wrong Bearer token reads nothing.
	_, body = c.get("/login")
	code, _, hdr := c.post("/login", values("operator", "mallory", "token", "guess", "csrf", field(t, csrfField, body)))
	require.Equal(t, http.StatusUnauthorized, code)
	require.Empty(t, hdr.Values("Set-Cookie")[0:0])
	code, _ = c.get("/")
	require.Equal(t, http.StatusSeeOther, code)
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/intents", nil)
	req.Header.Set("Authorization", "Bearer guess")
	code, body, _ = c.do(req)
	require.Equal(t, http.StatusUnauthorized, code)
	require.NotContains(t, body, "acct-b")
}

// The session cookie is HttpOnly and SameSite=Strict, and when the console is served over TLS
// Secure and named __Host- (Path=/, no Domain: the browser sends it to this origin only), with
// HSTS on every answer.
func TestTheSessionCookieIsHttpOnlyStrictAndSecureOverTLS(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	c := h.client()
	c.login("alice")
	u, _ := url.Parse(h.srv.URL)
	cookies := c.http.Jar.Cookies(u)
	require.Len(t, cookies, 1)

	// The jar does not keep the attributes: read them off the login's answer, plain and TLS.
	for _, useTLS := range []bool{false, true} {
		s, err := console.New(console.Config{Ledger: h.Ledger, Token: testToken, TLS: useTLS})
		require.NoError(t, err)
		var srv *httptest.Server
		if useTLS {
			srv = httptest.NewTLSServer(s)
		} else {
			srv = httptest.NewServer(s)
		}
		defer srv.Close()
		hc := srv.Client()
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp, err := hc.Get(srv.URL + "/login")
		require.NoError(t, err)
		loginCookie := resp.Cookies()[0]
		resp.Body.Close()
		form := url.Values{"operator": {"alice"}, "token": {testToken}, "csrf": {loginCookie.Value}}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(loginCookie)
		resp, err = hc.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		var session *http.Cookie
		name := "atmost_console"
		if useTLS {
			name = "__Host-atmost_console" // sent to this host and port only
		}
		for _, ck := range resp.Cookies() {
			if ck.Name == name {
				session = ck
			}
		}
		require.NotNil(t, session, "a cookie named %s", name)
		require.True(t, session.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, session.SameSite)
		require.Equal(t, useTLS, session.Secure, "Secure exactly when served over TLS")
		require.Equal(t, "/", session.Path)
		require.Empty(t, session.Domain)
		if useTLS {
			require.Equal(t, "max-age=31536000", resp.Header.Get("Strict-Transport-Security"))
		} else {
			require.Empty(t, resp.Header.Get("Strict-Transport-Security"), "no HSTS in the clear")
		}
	}
	_ = tls.VersionTLS12
}

// A script reads with its operator's token as a Bearer header, and its change, recorded under
// that operator, needs the preview's confirmation like a person's.
func TestABearerTokenReadsAndChangesUnderItsOperator(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.failed("acct-a", "for a script")
	c := h.client()
	token := h.operatorToken("nightly-job", ledger.RoleOperator)
	bearer := func(method, path string, form url.Values) (int, string) {
		req, _ := http.NewRequest(method, h.srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		code, body, _ := c.do(req)
		return code, body
	}
	code, body := bearer(http.MethodGet, "/intents?state=failed", nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "/intents/"+key.String())

	form := values("verb", "park", "note", "the script says stop")
	code, body = bearer(http.MethodPost, "/intents/"+key.String()+"/act", form)
	require.Equal(t, http.StatusOK, code)
	confirm := field(t, confirmField, body)
	seq := field(t, seqField, body)
	code, _ = bearer(http.MethodPost, "/intents/"+key.String()+"/act", with(form, "confirm", confirm, "seq", seq))
	require.Equal(t, http.StatusSeeOther, code)
	in := h.Intent(key)
	require.Equal(t, ledger.Parked, in.State)
	hist := history(h, key)
	require.Equal(t, "console:nightly-job", hist[len(hist)-1].Actor)
}

// Resolving a parked intent in the console is the ledger's Resolve with the operator as actor
// and the evidence in the history, its event on ATMOST_EVENTS, and the intent page shows both.
func TestResolveWritesTheHistoryRowAndEventOfTheCLI(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.parkedNotFound("acct-b", "resolve me")
	c := h.client()
	csrf := c.login("alice")
	path := "/intents/" + key.String() + "/act"
	form := values("csrf", csrf, "verb", "resolve", "to", "failed", "note", "not on the profile at 10:02", "seq", "6")
	confirm, body := c.preview(path, form)
	require.Contains(t, body, "parked (reconcile_not_found) → failed (operator_failed)")
	require.Equal(t, ledger.Parked, h.Intent(key).State, "a preview changes nothing")

	code, _, hdr := c.post(path, with(form, "confirm", confirm, "seq", field(t, seqField, body)))
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, "/intents/"+key.String(), hdr.Get("Location"))
	in := h.Intent(key)
	require.Equal(t, ledger.Failed, in.State)
	require.Equal(t, ledger.ReasonOperatorFailed, in.Reason)
	last := history(h, key)[len(history(h, key))-1]
	require.Equal(t, "console:alice", last.Actor)
	require.JSONEq(t, `{"evidence":"not on the profile at 10:02"}`, string(last.Detail))

	_, body = c.get("/intents/" + key.String())
	require.Contains(t, body, "Resolve as failed: done, by console:alice. Its event is published on ATMOST_EVENTS.")
	require.Contains(t, body, "console:alice")
	require.Contains(t, body, "operator_failed")
	require.Regexp(t, `on ATMOST_EVENTS \(stream sequence \d+\)</td></tr>\s*</tbody>`, body, "the last transition's event is on the stream")
	require.NotContains(t, body, "in the outbox, not published yet")
}

// A change without the session's CSRF token, with a wrong one, from another origin, or a
// confirmation replayed, is refused and changes nothing.
func TestForgedAndReplayedChangesChangeNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.failed("acct-a", "guard me")
	c := h.client()
	csrf := c.login("alice")
	path := "/intents/" + key.String() + "/act"
	form := values("csrf", csrf, "verb", "park", "note", "stop it")
	confirm, body := c.preview(path, form)
	apply := with(form, "confirm", confirm, "seq", field(t, seqField, body))
	before := len(history(h, key))

	for name, f := range map[string]url.Values{
		"no CSRF token":    with(apply, "csrf", ""),
		"a wrong CSRF one": with(apply, "csrf", csrf+"x"),
	} {
		code, _, _ := c.post(path, f)
		require.Equal(t, http.StatusForbidden, code, name)
	}
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+path, strings.NewReader(apply.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	code, _, _ := c.do(req)
	require.Equal(t, http.StatusForbidden, code, "another origin")
	require.Len(t, history(h, key), before)
	require.Equal(t, ledger.Failed, h.Intent(key).State)

	code, _, _ = c.post(path, apply)
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, ledger.Parked, h.Intent(key).State)
	after := len(history(h, key))

	code, body, _ = c.post(path, apply)
	require.Equal(t, http.StatusConflict, code, "a replayed confirmation")
	require.Contains(t, body, "Nothing was changed")
	require.Len(t, history(h, key), after)

	// Another session cannot use alice's confirmation either.
	confirm2, body := c.preview("/controls/switch", values("csrf", csrf, "scope", "", "engaged", "on", "note", "incident 42"))
	require.Contains(t, body, "Turn the global switch on.")
	m := h.client()
	mcsrf := m.login("mallory")
	code, _, _ = m.post("/controls/switch", values("csrf", mcsrf, "scope", "", "engaged", "on", "note", "incident 42", "confirm", confirm2))
	require.Equal(t, http.StatusConflict, code)
	stopped, err := h.Ledger.Stopped(h.Ctx, "acct-a")
	require.NoError(t, err)
	require.False(t, stopped)
}

// A change previewed on an intent that moved before the confirmation is refused without a
// call, so the person never acts on what they did not see.
func TestAChangeOnAnIntentThatMovedSinceItsPreviewIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.failed("acct-a", "moves")
	c := h.client()
	csrf := c.login("alice")
	path := "/intents/" + key.String() + "/act"
	form := values("csrf", csrf, "verb", "park", "note", "stop it")
	confirm, body := c.preview(path, form)
	require.NoError(t, h.Ledger.RetryAs(h.Ctx, key, ledger.Actor{Name: "someone-else", Reason: "retried meanwhile"}))

	code, _, _ := c.post(path, with(form, "confirm", confirm, "seq", field(t, seqField, body)))
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, ledger.Pending, h.Intent(key).State, "not parked: it moved since the preview")
	_, body = c.get("/intents/" + key.String())
	require.Contains(t, body, "Refused, nothing was changed:")
	require.Contains(t, body, "moved since the preview")
}

// A bulk action shows the count and a sample, then applies each change through the guarded
// statement and reports how many changed and how many were refused because they moved.
func TestABulkActionChangesEachPreviewedIntentAndCountsTheRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	var keys []identity.DeliveryKey
	for _, text := range []string{"bulk one", "bulk two", "bulk three"} {
		keys = append(keys, h.parkedNotFound("acct-b", text))
	}
	other := h.parkedNotFound("acct-a", "not in the filter")
	c := h.client()
	csrf := c.login("alice")
	form := values("csrf", csrf, "state", "parked", "reason", "reconcile_not_found", "account", "acct-b", "verb", "resolve-failed", "note", "checked the profile: none of them is there")
	confirm, body := c.preview("/bulk", form)
	require.Contains(t, body, "Resolve as failed: 3 intents")
	for _, k := range keys {
		require.Contains(t, body, "/intents/"+k.String())
	}
	require.NotContains(t, body, other.String())

	// One of them is resolved by someone else between the preview and the confirmation.
	require.NoError(t, h.Ledger.Resolve(h.Ctx, keys[1], ledger.Published, "obj-found", ledger.Actor{Name: "bob", Reason: "found it"}))
	code, body, _ := c.post("/bulk", with(form, "confirm", confirm))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<b id="changed">2</b> changed, <b id="refused">1</b> refused`)
	require.Contains(t, body, keys[1].String()[:16])
	require.Equal(t, ledger.Failed, h.Intent(keys[0]).State)
	require.Equal(t, ledger.Published, h.Intent(keys[1]).State)
	require.Equal(t, ledger.Failed, h.Intent(keys[2]).State)
	require.Equal(t, ledger.Parked, h.Intent(other).State)

	code, _, _ = c.post("/bulk", with(form, "confirm", confirm))
	require.Equal(t, http.StatusConflict, code, "the plan is applied once")
}

// Kill switches and policies change through SetSwitch and SetPolicy, recorded in the control
// history under the operator.
func TestSwitchesAndPoliciesChangeThroughTheControlHistory(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	c := h.client()
	csrf := c.login("alice")
	sw := values("csrf", csrf, "scope", "acct-b", "engaged", "on", "note", "acct-b posts garbage")
	confirm, _ := c.preview("/controls/switch", sw)
	code, _, _ := c.post("/controls/switch", with(sw, "confirm", confirm))
	require.Equal(t, http.StatusSeeOther, code)
	stopped, err := h.Ledger.Stopped(h.Ctx, "acct-b")
	require.NoError(t, err)
	require.True(t, stopped)

	pol := values("csrf", csrf, "scope", "acct-a", "attempt_cap", "5", "inherit_retryable_reasons", "on", "note", "more tries for acct-a")
	confirm, body := c.preview("/controls/policy", pol)
	require.Contains(t, body, "attempt_cap: inherit → 5")
	code, _, _ = c.post("/controls/policy", with(pol, "confirm", confirm))
	require.Equal(t, http.StatusSeeOther, code)
	p, err := h.Ledger.PolicyFor(h.Ctx, "acct-a")
	require.NoError(t, err)
	require.Equal(t, 5, p.AttemptCap)

	changes, err := h.Ledger.ControlHistory(h.Ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, changes, 5, "the harness's two accounts, its operator alice, then the console's two changes")
	for _, ch := range changes[:2] {
		require.Equal(t, "console:alice", ch.Actor)
	}
	_, body = c.get("/controls")
	require.Contains(t, body, "acct-b posts garbage")
	require.Contains(t, body, "the console&#39;s test accounts", "every kind of change, accounts too")
	require.Contains(t, body, "more tries for acct-a")

	bad := values("csrf", csrf, "scope", "", "retryable_reasons", "send_unknown", "note", "never")
	code, body, _ = c.post("/controls/policy", bad)
	require.Equal(t, http.StatusUnprocessableEntity, code, "refused before any preview")
	require.Contains(t, body, "can never be retried")
	require.Contains(t, body, `value="never"`, "the form keeps what was typed")
	require.NotContains(t, body, `name="confirm"`)

	// A value that is not a number is refused in the operator's words, the form as typed.
	code, body, _ = c.post("/controls/policy", values("csrf", csrf, "scope", "acct-a", "attempt_cap", "abc", "backoff_max", "soon", "note", "more tries"))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, body, "attempt_cap: give a whole number, such as 5 (you gave &#34;abc&#34;)")
	require.NotContains(t, body, "strconv")
	require.Contains(t, body, `value="abc"`)
	require.Contains(t, body, `value="soon"`)
	require.Contains(t, body, `<option selected>acct-a</option>`)
	code, body, _ = c.post("/controls/policy", values("csrf", csrf, "scope", "", "backoff_max", "soon", "note", "more tries"))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, body, "backoff_max: give a duration, such as 500ms, 5s or 10m (you gave &#34;soon&#34;)")

	// The health thresholds and the backoff factor are fields of the same form.
	health := values("csrf", csrf, "scope", "acct-a", "trip_failures", "5", "trip_unknowns", "0", "trip_window", "2m",
		"probe_base", "1s", "probe_max", "1m", "backoff_factor", "1.5", "note", "a platform that stalls")
	confirm, body = c.preview("/controls/policy", health)
	require.Contains(t, body, "trip_failures: inherit → 5")
	require.Contains(t, body, "backoff_factor: inherit → 1.5")
	code, _, _ = c.post("/controls/policy", with(health, "confirm", confirm))
	require.Equal(t, http.StatusSeeOther, code)
	p, err = h.Ledger.PolicyFor(h.Ctx, "acct-a")
	require.NoError(t, err)
	require.Equal(t, 5, p.TripFailures)
	require.Zero(t, p.TripUnknowns)
	require.Equal(t, 2*time.Minute, p.TripWindow)
	require.Equal(t, time.Second, p.ProbeBase)
	require.Equal(t, time.Minute, p.ProbeMax)
	require.InDelta(t, 1.5, p.BackoffFactor, 0)
	_, body = c.get("/controls")
	require.Contains(t, body, `<td data-label="backoff_factor">1.5</td>`)
	code, body, _ = c.post("/controls/policy", values("csrf", csrf, "scope", "acct-a", "backoff_factor", "fast", "note", "x"))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, body, "backoff_factor: give a number, such as 2 or 1.5 (you gave &#34;fast&#34;)")
	code, body, _ = c.post("/controls/policy", values("csrf", csrf, "scope", "acct-a", "probe_base", "0s", "note", "x"))
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, body, "probe base 0s: it must be a whole number of milliseconds, at least 1")
}

// The pages read what the ledger holds: the overview counts parked intents by reason first,
// the list filters, an intent shows its whole story and what may be done with it.
func TestThePagesShowWhatTheLedgerHolds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	parked := h.parkedNotFound("acct-b", "the parked one")
	failed := h.failed("acct-a", "the failed one")
	published := h.published("acct-a", "the published one")
	c := h.client()
	c.login("alice")

	_, body := c.get("/")
	require.Regexp(t, `(?s)Waiting.*s-parked">parked</span></a> <span class="total">1</span>.*reconcile_not_found</a> <b>1</b>.*s-failed">failed`, body)
	require.Contains(t, body, "Every account can be served.")
	_, err := h.Ledger.SetAccountDisabled(h.Ctx, "acct-b", true, ledger.Actor{Name: "user:bob", Reason: "the platform asked us to pause"})
	require.NoError(t, err)
	_, body = c.get("/")
	require.Contains(t, body, "acct-b: disabled (atmost accounts enable serves it again; its intents wait), by user:bob: the platform asked us to pause")
	require.NotContains(t, body, "acct-a:", "only the account a gate holds")
	// An account its health holds: state, cause, since and the next probe.
	h.Exec(`INSERT INTO account_health (account_id, state, cause, next_probe_at) VALUES ('acct-a', 'holding', 'platform_unavailable', now() + INTERVAL '30 seconds')
	        ON CONFLICT (account_id) DO UPDATE SET state = excluded.state, cause = excluded.cause, next_probe_at = excluded.next_probe_at`)
	_, body = c.get("/")
	require.Regexp(t, `acct-a: holding \(platform_unavailable\), its intents wait since \S+; next probe \S+`, body)
	h.Exec(`UPDATE account_health SET cause = 'auth_failed', next_probe_at = NULL WHERE account_id = 'acct-a'`)
	_, body = c.get("/")
	require.Contains(t, body, "acct-a: holding (auth_failed), its intents wait since ")
	require.Contains(t, body, "; no probe: atmost accounts resume ends it")
	h.Exec(`DELETE FROM account_health`)

	_, body = c.get("/intents?state=parked&account=acct-b")
	require.Contains(t, body, parked.String())
	require.NotContains(t, body, failed.String())
	_, body = c.get("/intents?q=" + url.QueryEscape("THE PUBLISHED"))
	require.Contains(t, body, published.String())
	require.NotContains(t, body, parked.String())
	code, _ := c.get("/intents?q=" + parked.String())
	require.Equal(t, http.StatusSeeOther, code, "a delivery key goes to its intent")

	_, body = c.get("/intents/" + parked.String())
	for _, want := range []string{"the parked one", "reconcile_not_found", "send_unknown", "lookup <b>claimed</b>", "not_found", "timeout after 2s",
		"Resolve as published…", "Resolve as failed…", "<b>retry</b>: not now", "<b>park</b>: not now"} {
		require.Contains(t, body, want)
	}
	_, body = c.get("/intents/" + failed.String())
	require.Contains(t, body, "Retry…")
	require.Contains(t, body, "<b>resolve</b>: not now")
	_, body = c.get("/intents/" + published.String())
	require.Contains(t, body, "obj-the published one")
	require.Contains(t, body, "a published intent never moves again")

	_, body = c.get("/rejects")
	require.Contains(t, body, "No reject.")
}

// An intent parked as a duplicate of its text names the intent that holds the text, linked, and
// when the window ends, as atmost intents show does: how long after the holder's authorization
// while the holder was stored first and waits, a time once it is authorized.
func TestTheIntentPageNamesWhoHoldsADuplicateText(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	post := func(occurrence string) identity.DeliveryKey {
		e, err := identity.NewEnvelope("acct-a", "post", "", []byte(`{"text":"said twice"}`), occurrence, nil)
		require.NoError(t, err)
		res, err := h.Ledger.Submit(h.Ctx, []identity.Envelope{e})
		require.NoError(t, err)
		return res[0].Key
	}
	authorize := func(key identity.DeliveryKey) ledger.Authorization {
		c, err := h.Ledger.Begin(h.Ctx, key, sha256.Sum256([]byte(key.String())), time.Minute)
		require.NoError(t, err)
		a, err := h.Ledger.Authorize(h.Ctx, c, 2*time.Minute, "")
		require.NoError(t, err)
		return a
	}
	original, waiting, sent := post(""), post("again"), post("once more")
	require.Equal(t, ledger.ReasonDuplicateText, authorize(waiting).Reason, "the original is stored first and waits")
	require.True(t, authorize(original).Authorized())
	require.Equal(t, ledger.ReasonDuplicateText, authorize(sent).Reason)
	c := h.client()
	c.login("alice")

	holder := `<dt>Text held by</dt><dd><a href="/intents/` + original.String() + `"><code class="key">` + original.String() + `</code></a></dd>`
	_, body := c.get("/intents/" + waiting.String())
	require.Contains(t, body, holder)
	require.Contains(t, body, "<dt>Window ends</dt><dd>24h0m0s after the holder is authorized")

	var lastAt time.Time
	require.NoError(t, h.DB.Pool.QueryRow(h.Ctx, `SELECT last_at FROM text_claims`).Scan(&lastAt))
	_, body = c.get("/intents/" + sent.String())
	require.Contains(t, body, holder)
	require.Contains(t, body, "<dt>Window ends</dt><dd>"+lastAt.Add(24*time.Hour).UTC().Format("2006-01-02 15:04:05Z")+"</dd>")

	_, body = c.get("/intents/" + original.String())
	require.NotContains(t, body, "Text held by", "only a duplicate says so")
}
