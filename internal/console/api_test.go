package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// api is a script of the console's API: a token (or a browser's session cookie), and plain
// HTTP requests.
type api struct {
	h     *harness
	c     *client
	token string
}

func (h *harness) api(token string) *api { return &api{h: h, c: h.client(), token: token} }

// call sends method to path with body (nil for none) as JSON and returns the status and the
// answer, which is always JSON.
func (a *api) call(method, path string, body any) (int, map[string]any) {
	a.h.t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(a.h.t, err)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, a.h.srv.URL+path, rd)
	require.NoError(a.h.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	code, text, hdr := a.c.do(req)
	require.Equal(a.h.t, "application/json", hdr.Get("Content-Type"), "%s %s answers JSON: %s", method, path, text)
	var out map[string]any
	require.NoError(a.h.t, json.Unmarshal([]byte(text), &out), text)
	return code, out
}

// refused checks that the answer is a refusal with status and code, and returns its message.
func (a *api) refused(code int, out map[string]any, wantStatus int, wantCode string) string {
	a.h.t.Helper()
	e, ok := out["error"].(map[string]any)
	require.True(a.h.t, ok, "an error: %v", out)
	require.Equal(a.h.t, wantStatus, code, "%v", out)
	require.Equal(a.h.t, wantCode, e["code"], "%v", out)
	return e["message"].(string)
}

// preview posts a change without confirm and returns the body that applies it.
func (a *api) preview(path string, body map[string]any) (map[string]any, map[string]any) {
	a.h.t.Helper()
	code, out := a.call(http.MethodPost, path, body)
	require.Equal(a.h.t, http.StatusOK, code, "%v", out)
	require.NotEmpty(a.h.t, out["confirm"], "%v", out)
	confirm := map[string]any{}
	for k, v := range out["confirm_body"].(map[string]any) {
		confirm[k] = v
	}
	return out, confirm
}

func keysOf(t *testing.T, list any) []string {
	t.Helper()
	var out []string
	for _, k := range list.([]any) {
		out = append(out, k.(string))
	}
	slices.Sort(out)
	return out
}

// The API drives the journeys of the browser tests with plain HTTP requests, each answer
// checked by its status: a bulk retry by selection with the exact count, "not sent, send again"
// on a parked intent, a policy change refused (422), an intent that moved (409), a spent
// confirmation (409), a viewer (403), no token (401).
func TestTheAPIDrivesTheConsolesJourneys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	var failed []identity.DeliveryKey
	for _, text := range []string{"Maintenance window tonight", "Store hours for the holidays", "Spring sale starts Monday"} {
		failed = append(failed, h.failed("acct-a", text))
	}
	parked := h.parkedNotFound("acct-b", "Launch post for the spring sale")
	alice := h.api(h.operatorToken("alice", ledger.RoleOperator))

	// No token, a wrong token: 401, and nothing of the ledger.
	code, out := h.api("").call(http.MethodGet, "/api/v1/intents", nil)
	h.api("").refused(code, out, http.StatusUnauthorized, "unauthorized")
	code, out = h.api("not-a-token-of-anyone").call(http.MethodGet, "/api/v1/intents/"+parked.String(), nil)
	require.NotContains(t, out, "intent")
	h.api("").refused(code, out, http.StatusUnauthorized, "unauthorized")

	code, out = alice.call(http.MethodGet, "/api/v1/me", nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "console:alice", out["actor"])
	require.Equal(t, true, out["can_change"])

	// A bulk retry by selection: the exact count, then exactly the two selected.
	selected := []string{failed[0].String(), failed[1].String()}
	pv, confirm := alice.preview("/api/v1/bulk", map[string]any{"verb": "retry", "note": "the platform is back (INC-42)", "key": selected})
	require.EqualValues(t, 2, pv["count"])
	require.Equal(t, ledger.Failed, h.Intent(failed[0]).State, "the preview changed nothing")
	code, out = alice.call(http.MethodPost, "/api/v1/bulk", confirm)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, selected, keysOf(t, out["changed"]))
	require.Empty(t, out["refused"])
	for _, k := range failed[:2] {
		require.Equal(t, ledger.Pending, h.Intent(k).State)
		last := history(h, k)[len(history(h, k))-1]
		require.Equal(t, "console:alice", last.Actor)
	}
	require.Equal(t, ledger.Failed, h.Intent(failed[2]).State, "not selected")

	// The same confirmation again: spent, 409, nothing changed.
	before := len(history(h, failed[0]))
	code, out = alice.call(http.MethodPost, "/api/v1/bulk", confirm)
	alice.refused(code, out, http.StatusConflict, "confirmation")
	require.Len(t, history(h, failed[0]), before)

	// "Not sent, send again" on a parked intent: one confirmation, two history rows.
	_, confirm = alice.preview("/api/v1/intents/"+parked.String()+"/actions", map[string]any{"verb": "resend", "note": "no post on the profile (checked 10:04)"})
	require.Equal(t, ledger.Parked, h.Intent(parked).State, "the preview changed nothing")
	code, out = alice.call(http.MethodPost, "/api/v1/intents/"+parked.String()+"/actions", confirm)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, []string{parked.String()}, keysOf(t, out["changed"]))
	require.Equal(t, ledger.Pending, h.Intent(parked).State)
	rows := history(h, parked)
	for _, tr := range rows[len(rows)-2:] {
		require.Equal(t, "console:alice", tr.Actor)
	}
	require.Equal(t, []ledger.Reason{ledger.ReasonOperatorFailed, ledger.ReasonRetried}, []ledger.Reason{rows[len(rows)-2].Reason, rows[len(rows)-1].Reason})
	code, out = alice.call(http.MethodPost, "/api/v1/intents/"+parked.String()+"/actions", confirm)
	alice.refused(code, out, http.StatusConflict, "confirmation")
	require.Len(t, history(h, parked), len(rows), "a spent confirmation changes nothing")

	// "Not sent, send again" where it is not allowed (the intent is pending now): 422, with why.
	code, out = alice.call(http.MethodPost, "/api/v1/intents/"+parked.String()+"/actions", map[string]any{"verb": "resend", "note": "again"})
	require.Contains(t, alice.refused(code, out, http.StatusUnprocessableEntity, "refused"), "not sent, send again is not allowed now")

	// A park previewed, then the intent moves (a retry by the CLI): 409, nothing changed.
	_, confirm = alice.preview("/api/v1/intents/"+failed[2].String()+"/actions", map[string]any{"verb": "park", "note": "hold it for legal"})
	require.NoError(t, h.Ledger.RetryAs(h.Ctx, failed[2], ledger.Actor{Name: "user:bob", Reason: "retry from the CLI"}))
	code, out = alice.call(http.MethodPost, "/api/v1/intents/"+failed[2].String()+"/actions", confirm)
	require.Contains(t, alice.refused(code, out, http.StatusConflict, "moved"), "moved since the preview")
	require.Equal(t, ledger.Pending, h.Intent(failed[2]).State)

	// A confirmation is bound to the change previewed and to who previewed it.
	_, confirm = alice.preview("/api/v1/intents/"+failed[2].String()+"/actions", map[string]any{"verb": "park", "note": "hold it for legal"})
	other := map[string]any{}
	for k, v := range confirm {
		other[k] = v
	}
	other["note"] = "another reason"
	code, out = alice.call(http.MethodPost, "/api/v1/intents/"+failed[2].String()+"/actions", other)
	alice.refused(code, out, http.StatusConflict, "confirmation")
	bob := h.api(h.operatorToken("bob", ledger.RoleOperator))
	code, out = bob.call(http.MethodPost, "/api/v1/intents/"+failed[2].String()+"/actions", confirm)
	bob.refused(code, out, http.StatusConflict, "confirmation")
	require.Equal(t, ledger.Pending, h.Intent(failed[2]).State)

	// A policy change refused: what is wrong, in the operator's words.
	code, out = alice.call(http.MethodPost, "/api/v1/policies", map[string]any{"scope": "acct-a", "attempt_cap": "abc", "note": "more tries"})
	require.Contains(t, alice.refused(code, out, http.StatusUnprocessableEntity, "invalid"), "attempt_cap: give a whole number")
	code, out = alice.call(http.MethodPost, "/api/v1/policies", map[string]any{"scope": "acct-zz", "attempt_cap": 3, "note": "more tries"})
	require.Contains(t, alice.refused(code, out, http.StatusUnprocessableEntity, "refused"), "unknown account")
	// And one made: previewed, confirmed, in the control history under the operator.
	_, confirm = alice.preview("/api/v1/policies", map[string]any{"scope": "acct-a", "attempt_cap": 7, "note": "more tries for the sale"})
	code, out = alice.call(http.MethodPost, "/api/v1/policies", confirm)
	require.Equal(t, http.StatusOK, code, "%v", out)
	p, err := h.Ledger.PolicyFor(h.Ctx, "acct-a")
	require.NoError(t, err)
	require.Equal(t, 7, p.AttemptCap)

	// A viewer reads and changes nothing: 403 on every change.
	viewer := h.api(h.operatorToken("vera", ledger.RoleViewer))
	code, out = viewer.call(http.MethodGet, "/api/v1/switches", nil)
	require.Equal(t, http.StatusOK, code, "%v", out)
	for path, body := range map[string]map[string]any{
		"/api/v1/switches": {"scope": "", "engaged": true, "note": "incident"},
		"/api/v1/policies": {"scope": "", "attempt_cap": 2, "note": "fewer"},
		"/api/v1/bulk":     {"verb": "park", "note": "hold", "state": "pending"},
		"/api/v1/intents/" + failed[2].String() + "/actions": {"verb": "park", "note": "hold"},
		"/api/v1/rejects/replay":                             {"note": "fixed"},
	} {
		code, out = viewer.call(http.MethodPost, path, body)
		viewer.refused(code, out, http.StatusForbidden, "viewer")
	}

	// A switch turned on: previewed, confirmed, the control history says who and why.
	_, confirm = alice.preview("/api/v1/switches", map[string]any{"scope": "acct-b", "engaged": true, "note": "incident 43"})
	code, out = alice.call(http.MethodPost, "/api/v1/switches", confirm)
	require.Equal(t, http.StatusOK, code, "%v", out)
	code, out = alice.call(http.MethodGet, "/api/v1/control-history?kind=switch", nil)
	require.Equal(t, http.StatusOK, code)
	last := out["history"].([]any)[0].(map[string]any)
	require.Equal(t, "console:alice", last["actor"])
	require.Equal(t, "incident 43", last["reason"])
	require.Equal(t, "acct-b", last["scope"])

	// Unknown routes and intents: 404, in JSON.
	code, out = alice.call(http.MethodGet, "/api/v1/nothing-here", nil)
	alice.refused(code, out, http.StatusNotFound, "not_found")
	code, out = alice.call(http.MethodDelete, "/api/v1/intents", nil)
	alice.refused(code, out, http.StatusNotFound, "not_found")
	code, out = alice.call(http.MethodGet, "/api/v1/intents/"+strings.Repeat("0", 64), nil)
	alice.refused(code, out, http.StatusNotFound, "not_found")
	code, out = alice.call(http.MethodPost, "/api/v1/intents/"+failed[2].String()+"/actions", map[string]any{"verb": "launch", "note": "x"})
	alice.refused(code, out, http.StatusUnprocessableEntity, "invalid")
	// A JSON body's values are checked as a form's are, before anyone reads them.
	code, out = alice.call(http.MethodPost, "/api/v1/intents/"+failed[2].String()+"/actions", map[string]any{"verb": "park", "note": "a NUL \x00 here"})
	alice.refused(code, out, http.StatusBadRequest, "bad_request")
	code, out = alice.call(http.MethodPost, "/api/v1/intents/"+failed[2].String()+"/actions", map[string]any{"verb": "park", "note": map[string]any{"nested": 1}})
	alice.refused(code, out, http.StatusBadRequest, "bad_request")
	require.Equal(t, ledger.Pending, h.Intent(failed[2]).State)
}

// A browser's session may use the API too, with the CSRF rules of its pages: a change without
// the session's CSRF token is refused.
func TestAnAPIChangeWithASessionCookieNeedsItsCSRFToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.failed("acct-a", "Maintenance window tonight")
	a := h.api("")
	csrf := a.c.login("alice")
	code, out := a.call(http.MethodGet, "/api/v1/me", nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, csrf, out["csrf"])
	code, out = a.call(http.MethodPost, "/api/v1/intents/"+key.String()+"/actions", map[string]any{"verb": "park", "note": "hold"})
	a.refused(code, out, http.StatusForbidden, "forbidden")
	code, out = a.call(http.MethodPost, "/api/v1/intents/"+key.String()+"/actions", map[string]any{"verb": "park", "note": "hold", "csrf": "wrong"})
	a.refused(code, out, http.StatusForbidden, "forbidden")
	_, confirm := a.preview("/api/v1/intents/"+key.String()+"/actions", map[string]any{"verb": "park", "note": "hold", "csrf": csrf})
	confirm["csrf"] = csrf
	code, out = a.call(http.MethodPost, "/api/v1/intents/"+key.String()+"/actions", confirm)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.Equal(t, ledger.Parked, h.Intent(key).State)
}

// The API lists and reads what the pages show: intents with the same filters and keyset
// paging, one intent with its history, attempts and events, rejects, accounts with their
// health, switches, policies and the control history.
func TestTheAPIReadsWhatThePagesShow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	r := h.realistic()
	a := h.api(h.operatorToken("vera", ledger.RoleViewer))

	// Every failed intent, a page of one at a time, by the cursor the answer gives.
	var seen []string
	path := "/api/v1/intents?state=parked&per=2"
	for range 10 {
		code, out := a.call(http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, code, "%v", out)
		for _, in := range out["intents"].([]any) {
			m := in.(map[string]any)
			require.Equal(t, "parked", m["state"])
			seen = append(seen, m["key"].(string))
		}
		next, ok := out["next"].(map[string]any)
		if !ok {
			break
		}
		path = "/api/v1/intents?state=parked&per=2&after_at=" + next["after_at"].(string) + "&after_key=" + next["after_key"].(string)
	}
	want := []string{r.notFound.String(), r.unavailable.String(), r.operator.String(), r.exhausted.String(), r.unsendable.String()}
	slices.Sort(want)
	slices.Sort(seen)
	require.Equal(t, want, seen, "each parked intent once")
	code, out := a.call(http.MethodGet, "/api/v1/intents?state=sideways", nil)
	a.refused(code, out, http.StatusUnprocessableEntity, "invalid")

	code, out = a.call(http.MethodGet, "/api/v1/intents/"+r.notFound.String(), nil)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "reconcile_not_found", out["intent"].(map[string]any)["reason"])
	require.NotEmpty(t, out["runbook"].(map[string]any)["check"])
	var verbs []string
	for _, v := range out["actions"].([]any) {
		if v.(map[string]any)["allowed"] == true {
			verbs = append(verbs, v.(map[string]any)["verb"].(string))
		}
	}
	require.Equal(t, []string{"resolve", "resend"}, verbs)
	code, out = a.call(http.MethodGet, "/api/v1/intents/"+r.indeterminate.String(), nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, out["lookup"], "reconcile delay of 2s")

	code, out = a.call(http.MethodGet, "/api/v1/intents/"+r.notFound.String()+"/history", nil)
	require.Equal(t, http.StatusOK, code)
	hist := out["history"].([]any)
	require.Equal(t, "parked", hist[len(hist)-1].(map[string]any)["to"])
	code, out = a.call(http.MethodGet, "/api/v1/intents/"+r.notFound.String()+"/attempts", nil)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, out["attempts"], 1)
	require.NotEmpty(t, out["reconciliations"])
	code, out = a.call(http.MethodGet, "/api/v1/intents/"+r.notFound.String()+"/events", nil)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, out["events"], len(hist))

	code, out = a.call(http.MethodGet, "/api/v1/rejects", nil)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, out["rejects"], 2)
	code, out = a.call(http.MethodGet, "/api/v1/accounts", nil)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, out["accounts"], 3)
	for _, acct := range out["accounts"].([]any) {
		m := acct.(map[string]any)
		require.Equal(t, "serving", m["health"].(map[string]any)["state"])
		require.Contains(t, m["held"], "the global kill switch is on", "the global switch holds every account")
	}
	code, out = a.call(http.MethodGet, "/api/v1/switches", nil)
	require.Equal(t, http.StatusOK, code)
	global := out["switches"].([]any)[0].(map[string]any)
	require.Equal(t, true, global["engaged"])
	require.Equal(t, "console:carol", global["actor"])
	code, out = a.call(http.MethodGet, "/api/v1/policies", nil)
	require.Equal(t, http.StatusOK, code)
	var capOf = map[string]any{}
	for _, p := range out["policies"].([]any) {
		m := p.(map[string]any)
		capOf[m["scope"].(string)] = m["fields"].(map[string]any)["attempt_cap"]
	}
	require.Equal(t, "1", capOf[longAccount])
	code, out = a.call(http.MethodGet, "/api/v1/control-history?limit=3", nil)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, out["history"], 3)
}

// documentedOperations are the operations of docs/console-api.yaml, as "METHOD /path".
func documentedOperations(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../docs/console-api.yaml")
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
	slices.Sort(documented)
	return documented
}

// The console's mux serves every documented operation, behind its authentication: without a
// token each is a 401, never the 404 of a route the console does not serve.
func TestEveryDocumentedAPIOperationIsServedBehindAToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := identity.DeliveryKey{}.String()
	for _, op := range documentedOperations(t) {
		method, path, _ := strings.Cut(op, " ")
		path = strings.ReplaceAll(path, "{key}", key)
		var body any
		if method == http.MethodPost {
			body = map[string]any{}
		}
		code, out := h.api("").call(method, path, body)
		h.api("").refused(code, out, http.StatusUnauthorized, "unauthorized")
	}
}

// Every route the API serves is in docs/console-api.yaml, and every operation there is served.
func TestEveryAPIRouteIsInTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	served := slices.Clone(console.APIRoutes())
	slices.Sort(served)
	require.Equal(t, served, documentedOperations(t))
	data, err := os.ReadFile("../../docs/console-api.yaml")
	require.NoError(t, err)
	require.Contains(t, string(data), fmt.Sprintf("at most %d bytes", console.MaxBody), "the document states the limit the code holds")
}

// Rejects replayed through the API: a dry run first, then exactly the rejects previewed, in the
// control history under the operator; the confirmation once.
func TestTheAPIReplaysRejectsPreviewedThenOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	keys := h.refuse("acct-9", "Hello from the new account")
	require.NoError(t, h.Ledger.AddAccount(h.Ctx, ledger.Account{ID: "acct-9", Platform: "sim", Settings: json.RawMessage(`{"url":"http://127.0.0.1:1"}`)},
		ledger.Actor{Name: "user:test", Reason: "the account the producer meant"}))
	a := h.api(h.operatorToken("alice", ledger.RoleOperator))
	pv, confirm := a.preview("/api/v1/rejects/replay", map[string]any{"reason": "unknown_account", "note": "acct-9 is configured now"})
	require.EqualValues(t, 1, pv["totals"].(map[string]any)["created"])
	_, err := h.Ledger.Get(h.Ctx, keys[0])
	require.ErrorIs(t, err, ledger.ErrNotFound, "the preview is a dry run")
	code, out := a.call(http.MethodPost, "/api/v1/rejects/replay", confirm)
	require.Equal(t, http.StatusOK, code, "%v", out)
	require.EqualValues(t, 1, out["totals"].(map[string]any)["created"])
	require.Equal(t, keys[0].String(), out["rejects"].([]any)[0].(map[string]any)["delivery_key"])
	require.Equal(t, ledger.Pending, h.Intent(keys[0]).State)
	code, out = a.call(http.MethodPost, "/api/v1/rejects/replay", confirm)
	a.refused(code, out, http.StatusConflict, "confirmation")
	rows, err := h.Ledger.ControlHistory(h.Ctx, ledger.ReplayKind, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "console:alice", rows[0].Actor)
	require.Equal(t, "acct-9 is configured now", rows[0].Reason)
}
