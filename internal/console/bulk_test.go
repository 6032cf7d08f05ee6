package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// selection is the intents page's form with keys ticked.
func selection(csrf string, keys ...identity.DeliveryKey) url.Values {
	v := values("csrf", csrf)
	for _, k := range keys {
		v.Add("key", k.String())
	}
	return v
}

// A bulk action on intents ticked one by one: the page counts them exactly, by state, and
// offers only the actions that fit them all; the preview lists every one; the result lists
// each intent changed and each refused, with its link; the confirmation is used once.
func TestABulkActionBySelectionOffersOnlyWhatFitsAndListsEachIntent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	var failed []identity.DeliveryKey
	for i := range 3 {
		failed = append(failed, h.failed("acct-a", fmt.Sprintf("failed post %d", i)))
	}
	r := h.realistic()
	c := h.client()
	csrf := c.login("alice")

	// A parked and two failed ones: no one action fits.
	code, body, _ := c.post("/bulk", selection(csrf, r.notFound, failed[0], failed[1]))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<h2 id="bulk-count">3 selected</h2>`)
	require.Contains(t, body, `id="no-action"`)
	require.NotContains(t, body, `name="verb"`)

	// Three failed ones: retry and park, never resolve as failed.
	code, body, _ = c.post("/bulk", selection(csrf, failed...))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<h2 id="bulk-count">3 selected</h2>`)
	require.Contains(t, body, `<option value="retry"`)
	require.Contains(t, body, `<option value="park"`)
	require.NotContains(t, body, `<option value="resolve-failed"`)

	// An action that does not fit, posted anyway, is refused before any preview.
	code, body, _ = c.post("/bulk", with(selection(csrf, failed...), "verb", "resolve-failed", "note", "gone"))
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "Resolve as failed applies to intents in parked, and these are in failed")
	require.NotContains(t, body, `name="confirm"`)

	form := with(selection(csrf, failed...), "verb", "retry", "note", "the platform is back (INC-42)")
	confirm, body := c.preview("/bulk", form)
	require.Contains(t, body, "Retry: 3 intents")
	require.Contains(t, body, `<h3 id="sample-count">All 3</h3>`)
	for _, k := range failed {
		require.Contains(t, body, "/intents/"+k.String())
	}
	sel := field(t, regexpField("sel"), body)

	// One of them is retried by someone else between the preview and the confirmation.
	require.NoError(t, h.Ledger.RetryAs(h.Ctx, failed[1], ledger.Actor{Name: "console:bob", Reason: "retried meanwhile"}))
	apply := values("csrf", csrf, "verb", "retry", "note", "the platform is back (INC-42)", "sel", sel, "confirm", confirm)
	code, body, _ = c.post("/bulk", apply)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<b id="changed">2</b> changed, <b id="refused">1</b> refused`)
	changed := body[strings.Index(body, `id="changed-list"`):]
	refused := body[strings.Index(body, `id="refused-list"`):strings.Index(body, `id="changed-list"`)]
	require.Contains(t, changed, `href="/intents/`+failed[0].String()+`"`)
	require.Contains(t, changed, `href="/intents/`+failed[2].String()+`"`)
	require.Contains(t, refused, `href="/intents/`+failed[1].String()+`"`)
	require.Contains(t, refused, "moved since the preview")
	for _, k := range []identity.DeliveryKey{failed[0], failed[2]} {
		require.Equal(t, ledger.Pending, h.Intent(k).State)
		hist := history(h, k)
		require.Equal(t, "console:alice", hist[len(hist)-1].Actor)
	}

	code, _, _ = c.post("/bulk", apply)
	require.Equal(t, http.StatusConflict, code, "the plan is applied once")
}

// A filter's set is counted exactly, past the first ten, and "act on all that match" from a
// list of failed intents offers what fits failed intents first.
func TestABulkActionByFilterCountsEveryMatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	unlimited := 0
	_, err := h.Ledger.SetPolicy(h.Ctx, "acct-b", ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "user:test", Reason: "no rate limit for the test"})
	require.NoError(t, err)
	var failed []identity.DeliveryKey
	for i := range 12 {
		failed = append(failed, h.failed("acct-b", fmt.Sprintf("failed post %d", i)))
	}
	h.parkedNotFound("acct-b", "parked one")
	c := h.client()
	csrf := c.login("alice")

	_, body := c.get("/intents?state=failed")
	require.Contains(t, body, `href="/bulk?state=failed"`)
	code, body := c.get("/bulk?state=failed")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<h2 id="bulk-count">All 12 that match</h2>`)
	require.Regexp(t, `<select name="verb"><option value="retry"`, body, "retry first, never resolve as failed")
	require.NotContains(t, body, `<option value="resolve-failed"`)

	confirm, body := c.preview("/bulk", values("csrf", csrf, "state", "failed", "verb", "park", "note", "hold them all"))
	require.Contains(t, body, `<h3 id="sample-count">All 12</h3>`)
	code, body, _ = c.post("/bulk", values("csrf", csrf, "state", "failed", "verb", "park", "note", "hold them all", "confirm", confirm))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<b id="changed">12</b> changed`)
	for _, k := range failed {
		require.Contains(t, body, `href="/intents/`+k.String()+`"`)
		require.Equal(t, ledger.Parked, h.Intent(k).State)
	}
}

// A person ticks failed intents on the intents page and retries them in bulk: the exact count,
// the actions that fit, the preview of every one, the result with each intent's link.
func TestAPersonRetriesSelectedIntentsInABrowser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	var failed []identity.DeliveryKey
	for _, text := range []string{"Maintenance window tonight", "Store hours for the holidays", "Spring sale starts Monday"} {
		failed = append(failed, h.failed("acct-a", text))
	}
	h.parkedNotFound("acct-b", "Launch post for the spring sale")
	ctx := browser(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/intents?state=failed"), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), h.operatorToken("alice", ledger.RoleOperator)),
		chromedp.Submit(chromedp.CSS(`form`))))
	waitVisible(t, ctx, `#pick`)
	for _, k := range failed[:2] {
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#pick input[value="`+k.String()+`"]`))))
	}
	shot(t, ctx, "intents-selected")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#act-on-selected`))))
	waitVisible(t, ctx, `#bulk-action`)
	require.Equal(t, "2 selected", text(t, ctx, `#bulk-count`))
	options := text(t, ctx, `#bulk-action select[name=verb]`)
	require.Contains(t, options, "retry (failed)")
	require.NotContains(t, options, "resolve as failed")
	shot(t, ctx, "bulk-selection")
	require.NoError(t, chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#bulk-action select[name=verb]`), "retry"),
		chromedp.SendKeys(chromedp.CSS(`#bulk-action input[name=note]`), "the platform is back (INC-42)"),
		chromedp.Submit(chromedp.CSS(`#bulk-action`))))
	waitVisible(t, ctx, `#confirm`)
	require.Contains(t, text(t, ctx, `h1`), "Retry: 2 intents")
	require.Equal(t, "All 2", text(t, ctx, `#sample-count`))
	require.Equal(t, ledger.Failed, h.Intent(failed[0]).State, "the preview changed nothing")
	shot(t, ctx, "bulk-selection-preview")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#confirm`))))
	waitVisible(t, ctx, `#changed-list`)
	require.Equal(t, "2", text(t, ctx, `#changed`))
	list := text(t, ctx, `#changed-list`)
	for _, k := range failed[:2] {
		require.Contains(t, list, k.String())
		require.Equal(t, ledger.Pending, h.Intent(k).State)
	}
	require.Equal(t, ledger.Failed, h.Intent(failed[2]).State, "not selected")
	shot(t, ctx, "bulk-selection-result")
}
