package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// realistic is a ledger as an on-call operator finds it: published intents, a failed one, an
// indeterminate one, intents parked for five reasons, long texts, refused input with a long
// message, an account with a long name and a policy of its own, and the global kill switch on.
type realistic struct {
	published, failed, indeterminate                       identity.DeliveryKey
	notFound, unavailable, operator, exhausted, unsendable identity.DeliveryKey
}

// longAccount is an account name as long as a real deployment's get.
const longAccount = "newsroom-eu-west-secondary-publishing"

func (h *harness) realistic() realistic {
	h.t.Helper()
	require.NoError(h.t, h.Ledger.AddAccount(h.Ctx, ledger.Account{ID: longAccount, Platform: "sim",
		Settings: json.RawMessage(`{"url":"http://platform-simulator.internal.example.net:9300/v1/newsroom-eu-west-secondary-publishing","reconcile_delay":"2s"}`)}, ledger.Actor{Name: "user:test", Reason: "the EU newsroom's second account"}))
	one, window := 1, 36*time.Hour
	_, err := h.Ledger.SetPolicy(h.Ctx, longAccount, ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: &one}}, ledger.Actor{Name: "user:test", Reason: "one attempt for this account"})
	require.NoError(h.t, err)
	_, err = h.Ledger.SetPolicy(h.Ctx, ledger.GlobalScope, ledger.PolicyEdit{Set: ledger.PolicyOverride{TextWindow: &window, RetryableReasons: []ledger.Reason{
		ledger.ReasonConnectionFailed, ledger.ReasonRateLimited, ledger.ReasonKillSwitch, ledger.ReasonCredentialRotating}}}, ledger.Actor{Name: "user:test", Reason: "retry what sent nothing, and a longer duplicate-text window after the double-posting incident"})
	require.NoError(h.t, err)
	var r realistic
	for _, text := range []string{"Good morning", "New blog post is up", "Thanks for 10k followers"} {
		r.published = h.published("acct-a", text)
	}
	r.failed = h.failed("acct-a", "Maintenance window tonight from 22:00 to 23:30 UTC; the shop stays open")
	r.indeterminate = h.indeterminate("acct-b", "Spring sale: "+strings.Repeat("everything-must-go-", 20))
	r.notFound = h.parkedNotFound("acct-b", "Launch post for the spring sale, with a link https://example.net/"+strings.Repeat("x", 120))
	r.unavailable = h.parked("acct-b", "Reply to @ana about shipping", ledger.Unavailable)
	r.operator = h.Submit("acct-a", "Weekly digest #41")[0]
	require.NoError(h.t, h.Ledger.Park(h.Ctx, r.operator, ledger.Actor{Name: "console:carol", Reason: "hold until legal reads it"}))
	r.exhausted = h.failed(longAccount, "Thread: how at-most-once works, part 1 of 7")
	require.ErrorIs(h.t, h.Ledger.RetryAs(h.Ctx, r.exhausted, ledger.Actor{Name: "console:carol", Reason: "one more try"}), ledger.ErrAttemptsExhausted)
	r.unsendable = h.Submit("acct-a", "A poll with 14 options")[0]
	require.NoError(h.t, h.Ledger.ParkUnsendable(h.Ctx, r.unsendable, "the platform takes at most 4 poll options"))
	h.refuse("acct-9", "Hello from the new account: "+strings.Repeat("a-very-long-word-without-a-space-", 12))
	h.refuse(longAccount+"-staging-2026", "A post for an account that is not there yet")
	_, err = h.Ledger.SetSwitch(h.Ctx, ledger.GlobalScope, true, ledger.Actor{Name: "console:carol", Reason: "incident 42: the platform double-posts"})
	require.NoError(h.t, err)
	h.drain()
	return r
}

// indeterminate takes one intent to indeterminate (send_unknown): bytes left, no answer.
func (h *harness) indeterminate(account, text string) identity.DeliveryKey {
	h.t.Helper()
	key := h.Submit(account, text)[0]
	c := h.authorize(key, text)
	_, err := h.Ledger.Complete(h.Ctx, c, ledger.Outcome{Result: ledger.Unknown, Reason: ledger.ReasonSendUnknown, Detail: map[string]any{"error": "timeout after 2s"}})
	require.NoError(h.t, err)
	h.drain()
	return key
}

// parked takes one intent to parked through its one lookup, which found result.
func (h *harness) parked(account, text string, result ledger.LookupResult) identity.DeliveryKey {
	h.t.Helper()
	key := h.indeterminate(account, text)
	rc, err := h.Ledger.ClaimReconciliation(h.Ctx, key, newClaimToken())
	require.NoError(h.t, err)
	st, err := h.Ledger.ResolveReconciliation(h.Ctx, rc, result, "", map[string]any{"lookup": "the status API answered 503"})
	require.NoError(h.t, err)
	require.Equal(h.t, ledger.Parked, st)
	h.drain()
	return key
}

// overflowJS lists what is wider than the viewport: the page itself when it scrolls sideways,
// and every element whose box reaches past either edge.
const overflowJS = `(() => {
  const W = document.documentElement.clientWidth, out = [];
  const sw = document.documentElement.scrollWidth;
  if (sw > W) out.push("the page scrolls sideways: " + sw + " px wide in " + W);
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > W + 0.5 || r.left < -0.5) {
      out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + String(el.className).replace(/ /g, ".") : "") +
        " spans " + Math.round(r.left) + ".." + Math.round(r.right) + ": " + (el.textContent || "").trim().slice(0, 40));
    }
  }
  return out.slice(0, 15);
})()`

// fits requires that nothing on the page in ctx is wider than the viewport.
func fits(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	var wide []string
	require.NoError(t, func() (err error) {
		wide, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](overflowJS))
		return err
	}())
	require.Empty(t, wide, "%s is wider than the viewport", what)
}

// At a 390 px phone and a 1366 px desktop, every page of a realistic ledger fits its width: no
// sideways scroll, no element past the edge. The switch's hold is one line for every account,
// and the page is dark where the system is.
func TestEveryPageFitsAPhoneAndADesktop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	r := h.realistic()
	ctx := browser(t)
	token := h.operatorToken("alice", ledger.RoleOperator)

	for _, width := range []int64{390, 1366} {
		require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(width, 900)))
		if width == 390 {
			require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/login"), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`))))
			fits(t, ctx, "the login page at 390 px")
			require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`input[name=token]`), token), chromedp.Submit(chromedp.CSS(`form`))))
			waitVisible(t, ctx, `#overview-body`)
		}
		pages := []string{"/", "/intents", "/intents?state=parked", "/bulk", "/bulk?state=parked", "/rejects", "/controls"}
		for _, k := range []identity.DeliveryKey{r.published, r.failed, r.indeterminate, r.notFound, r.unavailable, r.operator, r.exhausted, r.unsendable} {
			pages = append(pages, "/intents/"+k.String())
		}
		for _, p := range pages {
			require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+p)))
			waitVisible(t, ctx, `main h1`)
			fits(t, ctx, fmt.Sprintf("%s at %d px", p, width))
			switch {
			case width == 390 && p == "/":
				shot(t, ctx, "phone-overview")
			case width == 390 && p == "/intents/"+r.notFound.String():
				shot(t, ctx, "phone-intent")
			}
		}
		// A bulk action's page, preview and result, and a replay's preview, keep to the width too.
		reason := map[int64]string{390: "operator_parked", 1366: "request_unsendable"}[width]
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/bulk?state=parked&reason="+reason)))
		waitVisible(t, ctx, `#bulk-action`)
		require.NoError(t, chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`#bulk-action select[name=verb]`), "resolve-failed"),
			chromedp.SendKeys(chromedp.CSS(`#bulk-action input[name=note]`), "nobody wants it any more"),
			chromedp.Submit(chromedp.CSS(`#bulk-action`))))
		waitVisible(t, ctx, `#confirm`)
		fits(t, ctx, fmt.Sprintf("a bulk preview at %d px", width))
		require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#confirm`))))
		waitVisible(t, ctx, `#changed-list`)
		fits(t, ctx, fmt.Sprintf("a bulk result at %d px", width))
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/rejects")))
		waitVisible(t, ctx, `form.replay-one`)
		require.NoError(t, chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(`form.replay-one input[name=note]`), "acct-9 is coming"),
			chromedp.Submit(chromedp.CSS(`form.replay-one`))))
		waitVisible(t, ctx, `#confirm, #replay-totals`)
		fits(t, ctx, fmt.Sprintf("a replay preview at %d px", width))
		if width == 1366 {
			// A reject's message is read in a column of its own width, not squeezed by the others.
			require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/rejects")))
			waitVisible(t, ctx, `#rejects td.msg`)
			var msg float64
			require.NoError(t, func() (err error) {
				msg, err = chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector("#rejects td.msg").getBoundingClientRect().width`))
				return err
			}())
			require.GreaterOrEqual(t, msg, 300.0, "the message column's width at 1366 px")
		}

		// A preview, and the form that was refused, keep to the width too.
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/intents/"+r.failed.String()), chromedp.WaitVisible(chromedp.CSS(`#retry`)),
			chromedp.SendKeys(chromedp.CSS(`#retry input[name=note]`), "the maintenance window moved; send it again"),
			chromedp.Submit(chromedp.CSS(`#retry`))))
		waitVisible(t, ctx, `#confirm`)
		fits(t, ctx, fmt.Sprintf("a retry's preview at %d px", width))
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/controls"), chromedp.WaitVisible(chromedp.CSS(`#policy-form`)),
			chromedp.SendKeys(chromedp.CSS(`#policy-form input[name=attempt_cap]`), "abc"),
			chromedp.SendKeys(chromedp.CSS(`#policy-form input[name=note]`), "more tries for the sale"),
			chromedp.Submit(chromedp.CSS(`#policy-form`))))
		waitVisible(t, ctx, `#policy-problem`)
		fits(t, ctx, fmt.Sprintf("a refused policy form at %d px", width))
	}

	// The refused form speaks the operator's language and keeps what was typed.
	problem := text(t, ctx, `#policy-problem`)
	require.Contains(t, problem, `attempt_cap: give a whole number, such as 5 (you gave "abc")`)
	require.NotContains(t, problem, "strconv")
	typed, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`#policy-form input[name=note]`)))
	require.NoError(t, err)
	require.Equal(t, "more tries for the sale", typed)

	// One line says the global switch holds every account.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#all-held`))))
	require.Contains(t, text(t, ctx, `#all-held`), "the global kill switch is on, by console:carol: incident 42")
	var held int
	require.NoError(t, func() (err error) {
		held, err = chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#overview-body p.alarm").length`))
		return err
	}())
	require.Equal(t, 2, held, "the switch's line and the accounts line, not one line an account")

	// Dark where the system is.
	background := func() string {
		var bg string
		require.NoError(t, func() (err error) {
			bg, err = chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
			return err
		}())
		return bg
	}
	light := background()
	_, err = chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
	require.NoError(t, err)
	require.NotEqual(t, light, background(), "the dark scheme")
	shot(t, ctx, "overview-dark")
}

// tabTo presses Tab until the focus is on sel, as a person without a mouse would; it fails when
// sel cannot be reached within 80 presses.
func tabTo(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	js := fmt.Sprintf(`document.activeElement !== null && document.activeElement.matches(%s)`, jsString(sel))
	for range 80 {
		require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent(kb.Tab)))
		var on bool
		require.NoError(t, func() (err error) { on, err = chromedp.Run(ctx, chromedp.Evaluate[bool](js)); return err }())
		if on {
			return
		}
	}
	t.Fatalf("%s cannot be reached with the Tab key", sel)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// keys types s into the focused element.
func keys(t *testing.T, ctx context.Context, s string) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, chromedp.KeyEvent(s)))
}

// The main journeys work from the keyboard alone: logging in, finding an intent by its key,
// and retrying it through its preview and confirmation.
func TestTheMainJourneysWorkFromTheKeyboard(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.failed("acct-a", "Maintenance window tonight")
	h.published("acct-a", "Good morning")
	ctx := browser(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`))))

	// The token field has the focus: type it, Enter.
	keys(t, ctx, h.operatorToken("alice", ledger.RoleOperator))
	keys(t, ctx, kb.Enter)
	waitVisible(t, ctx, `#overview-body`)

	// To the intents, and find it by its key.
	tabTo(t, ctx, `header nav a[href^="/intents"]`)
	keys(t, ctx, kb.Enter)
	waitVisible(t, ctx, `form.filters input[name=q]`)
	tabTo(t, ctx, `form.filters input[name=q]`)
	keys(t, ctx, key.String())
	keys(t, ctx, kb.Enter)
	waitVisible(t, ctx, `#retry`)

	// Retry it: the reason, the preview, the confirmation.
	tabTo(t, ctx, `#retry input[name=note]`)
	keys(t, ctx, "the window moved to Friday")
	keys(t, ctx, kb.Enter)
	waitVisible(t, ctx, `#confirm`)
	require.Equal(t, ledger.Failed, h.Intent(key).State, "the preview changed nothing")
	tabTo(t, ctx, `#confirm`)
	keys(t, ctx, kb.Enter)
	waitVisible(t, ctx, `p.flash`)
	require.Contains(t, text(t, ctx, `p.flash`), "Retry: done, by console:alice")
	require.Equal(t, ledger.Pending, h.Intent(key).State)
}

// A person reads the runbook on each parked reason's page, and sends a parked intent again
// ("not sent, send again") through one preview and one confirmation.
func TestAPersonSendsAParkedIntentAgainInABrowser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	r := h.realistic()
	ctx := browser(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), h.operatorToken("alice", ledger.RoleOperator)),
		chromedp.Submit(chromedp.CSS(`form`))))
	waitVisible(t, ctx, `#overview-body`)

	for k, want := range map[identity.DeliveryKey]string{
		r.notFound:    "Then resolve as published with the object id when you find it",
		r.unavailable: "Then as for reconcile_not_found, find the object on the platform yourself",
		r.operator:    "Then whatever that person meant",
		r.exhausted:   "Check why the attempts failed",
		r.unsendable:  "Then resolve as failed, and tell the producer",
	} {
		require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/intents/"+k.String())))
		waitVisible(t, ctx, `#runbook`)
		require.Contains(t, text(t, ctx, `#runbook`), want)
	}

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/intents/"+r.notFound.String())))
	waitVisible(t, ctx, `#resend`)
	shot(t, ctx, "intent-runbook")
	require.NoError(t, chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#resend input[name=note]`), "not on the profile at 10:02; the platform's log shows no request"),
		chromedp.Submit(chromedp.CSS(`#resend`))))
	waitVisible(t, ctx, `#confirm`)
	require.Contains(t, text(t, ctx, `ul.effect`), "parked (reconcile_not_found) → failed (operator_failed) → pending (retried)")
	require.Equal(t, ledger.Parked, h.Intent(r.notFound).State, "the preview changed nothing")
	shot(t, ctx, "resend-preview")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#confirm`))))
	waitVisible(t, ctx, `p.flash`)
	require.Contains(t, text(t, ctx, `p.flash`), "Not sent, send again: done, by console:alice")
	hist := text(t, ctx, `#history`)
	require.Contains(t, hist, "operator_failed by console:alice")
	require.Contains(t, hist, "retried by console:alice")
	require.Equal(t, ledger.Pending, h.Intent(r.notFound).State)
	shot(t, ctx, "intent-sent-again")
}
