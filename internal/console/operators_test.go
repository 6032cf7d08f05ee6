package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// bearerDo sends a request with token as its Bearer header.
func (c *client) bearerDo(token, method, path string, form url.Values, header ...string) (int, string) {
	c.h.t.Helper()
	req, err := http.NewRequest(method, c.h.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(c.h.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	code, body, _ := c.do(req)
	return code, body
}

// changeRoutes are every change the console makes, each as a form an operator's preview would
// answer with 200: a viewer must get 403 from each, and no preview.
func changeRoutes(h *harness, failed identity.DeliveryKey, rejectID string) map[string]url.Values {
	return map[string]url.Values{
		"/intents/" + failed.String() + "/act": values("verb", "park", "note", "a viewer tries"),
		"/bulk":                                values("state", "failed", "verb", "park", "note", "a viewer tries"),
		"/rejects/replay":                      values("reason", "", "note", "a viewer tries"),
		"/controls/switch":                     values("scope", "", "engaged", "on", "note", "a viewer tries"),
		"/controls/policy":                     values("scope", "", "attempt_cap", "7", "note", "a viewer tries"),
	}
}

// A viewer reads every page the console has, and the pages offer it no change; every change
// route answers a viewer 403, by session and by Bearer token, and nothing changes.
func TestAViewerSeesEverythingAndChangesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	failed := h.failed("acct-a", "seen by a viewer")
	parked := h.parkedNotFound("acct-b", "parked, seen by a viewer")

	// An operator sees the changes offered, so their absence for the viewer means something.
	op := h.client()
	op.login("olga")
	for path, form := range map[string]string{"/intents/" + parked.String(): `action="/intents/` + parked.String() + `/act"`,
		"/controls": `action="/controls/switch"`, "/bulk": `action="/bulk"`} {
		code, body := op.get(path)
		require.Equal(t, http.StatusOK, code, path)
		require.Contains(t, body, form, path)
	}

	viewer := h.client()
	csrf := viewer.loginWith(h.operatorToken("vera", ledger.RoleViewer))
	for _, path := range []string{"/", "/intents?state=parked", "/intents/" + parked.String(), "/intents/" + failed.String(), "/controls", "/rejects", "/bulk"} {
		code, body := viewer.get(path)
		require.Equal(t, http.StatusOK, code, path)
		require.NotContains(t, body, `method="post" action="/intents/`, path)
		for _, action := range []string{"/bulk", "/rejects/replay", "/controls/switch", "/controls/policy"} {
			require.NotContains(t, body, `action="`+action+`"`, path)
		}
		require.Contains(t, body, "vera (viewer)", path)
	}
	_, body := viewer.get("/intents/" + parked.String())
	require.Contains(t, body, "reconcile_not_found", "a viewer sees the intent")

	viewerToken := h.operatorToken("vera", ledger.RoleViewer)
	for path, form := range changeRoutes(h, failed, "") {
		code, body, _ := viewer.post(path, with(form, "csrf", csrf))
		require.Equal(t, http.StatusForbidden, code, "%s by session: %s", path, body)
		require.Contains(t, body, "viewer", path)
		require.NotContains(t, body, `name="confirm"`, path)
		code, body = viewer.bearerDo(viewerToken, http.MethodPost, path, form)
		require.Equal(t, http.StatusForbidden, code, "%s by Bearer: %s", path, body)

		// The operator's very same form is previewed: the 403 is the role's.
		code, body, _ = op.post(path, with(form, "csrf", field(t, csrfField, func() string { _, b := op.get("/"); return b }())))
		require.Equal(t, http.StatusOK, code, "%s by an operator: %s", path, body)
	}
	require.Equal(t, ledger.Failed, h.Intent(failed).State)
	require.Equal(t, ledger.Parked, h.Intent(parked).State)
	changes, err := h.Ledger.ControlHistory(h.Ctx, "", 50)
	require.NoError(t, err)
	for _, ch := range changes {
		require.NotEqual(t, "console:vera", ch.Actor)
	}
}

// A revoked operator's session ends on its next request and its token logs nobody in, by the
// form or as a Bearer header; another operator's session goes on.
func TestARevokedOperatorsSessionsEndAndItsTokenStopsWorking(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.failed("acct-a", "before and after a revoke")
	token := h.operatorToken("rex", ledger.RoleOperator)
	rex, other := h.client(), h.client()
	csrf := rex.loginWith(token)
	other.login("otto")
	code, _ := rex.get("/intents/" + key.String())
	require.Equal(t, http.StatusOK, code)
	code, _ = rex.bearerDo(token, http.MethodGet, "/intents", nil)
	require.Equal(t, http.StatusOK, code)

	_, err := h.Ledger.RevokeOperator(h.Ctx, "rex", ledger.Actor{Name: "user:test", Reason: "left"})
	require.NoError(t, err)

	code, body := rex.get("/intents/" + key.String())
	require.Equal(t, http.StatusSeeOther, code, "the session ended at once")
	require.NotContains(t, body, key.String())
	code, _, _ = rex.post("/intents/"+key.String()+"/act", values("verb", "park", "note", "after the revoke", "csrf", csrf))
	require.Equal(t, http.StatusUnauthorized, code)
	code, _ = rex.bearerDo(token, http.MethodGet, "/intents", nil)
	require.Equal(t, http.StatusUnauthorized, code, "the token reads nothing")
	_, body = rex.get("/login")
	code, _, _ = rex.post("/login", values("token", token, "csrf", field(t, csrfField, body), "next", "/"))
	require.Equal(t, http.StatusUnauthorized, code, "the token logs nobody in")
	require.Equal(t, ledger.Failed, h.Intent(key).State)

	code, _ = other.get("/intents/" + key.String())
	require.Equal(t, http.StatusOK, code, "another operator's session goes on")
}

// The actor of a change is the identity whose token logged in: a form field or a header that
// names someone else changes nothing of it. The shared token is console:bootstrap.
func TestTheRecordedActorIsTheIdentityNeverANameSent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	lastActor := func(key identity.DeliveryKey) string {
		hist := history(h, key)
		return hist[len(hist)-1].Actor
	}
	park := func(post func(form url.Values) (int, string), key identity.DeliveryKey, extra ...string) {
		t.Helper()
		form := with(values("verb", "park", "note", "stop it"), extra...)
		code, body := post(form)
		require.Equal(t, http.StatusOK, code, body)
		code, body = post(with(form, "confirm", field(t, confirmField, body), "seq", field(t, seqField, body)))
		require.Equal(t, http.StatusSeeOther, code, body)
		require.Equal(t, ledger.Parked, h.Intent(key).State)
	}

	// A session: the login form's operator field, and every later form's, are not the actor.
	key := h.failed("acct-a", "by a session")
	c := h.client()
	_, body := c.get("/login")
	code, _, _ := c.post("/login", values("operator", "mallory", "token", h.operatorToken("alice", ledger.RoleOperator), "csrf", field(t, csrfField, body), "next", "/"))
	require.Equal(t, http.StatusSeeOther, code)
	_, body = c.get("/")
	csrf := field(t, csrfField, body)
	require.Contains(t, body, "<span>alice</span>")
	park(func(form url.Values) (int, string) {
		code, body, _ := c.post("/intents/"+key.String()+"/act", form)
		return code, body
	}, key, "csrf", csrf, "operator", "mallory", "actor", "mallory")
	require.Equal(t, "console:alice", lastActor(key))

	// A script: the Atmost-Operator header is not the actor.
	key = h.failed("acct-a", "by a script")
	token := h.operatorToken("bob", ledger.RoleOperator)
	park(func(form url.Values) (int, string) {
		return c.bearerDo(token, http.MethodPost, "/intents/"+key.String()+"/act", form, "Atmost-Operator", "mallory")
	}, key)
	require.Equal(t, "console:bob", lastActor(key))

	// The shared token is the built-in bootstrap operator.
	key = h.failed("acct-a", "by the shared token")
	park(func(form url.Values) (int, string) {
		return c.bearerDo(testToken, http.MethodPost, "/intents/"+key.String()+"/act", form, "Atmost-Operator", "mallory")
	}, key)
	require.Equal(t, "console:bootstrap", lastActor(key))
}
