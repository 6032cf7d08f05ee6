package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// The browser lane: the console in headless Chromium (Debian's chromium package; .ci/run
// installs it), driven with chromedp against a real ledger and JetStream. Under CI=true a
// missing browser fails the test, never skips it. ATMOST_CONSOLE_SCREENSHOTS=DIR keeps a
// screenshot of every step there (docs/console holds the README's).

// chromium finds the browser: ATMOST_CHROMIUM, or chromium on PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ATMOST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (apt-get install -y chromium, or set ATMOST_CHROMIUM): the console's browser tests need it"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser starts a fresh headless Chromium for the test, with a user-data directory of its own.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1360, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute) // a bound on a hang, not a timed assertion: a loaded machine is slow
	t.Cleanup(cancelTimeout)
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// shot keeps a screenshot of the page as NAME.png when ATMOST_CONSOLE_SCREENSHOTS is set.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("ATMOST_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}

// text reads the visible text of the first element sel matches, in one turn of the page's own
// JavaScript: no node id is held between finding the element and reading it, so a live update
// that replaces nodes (the overview's) cannot take the node from under the read.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	js := fmt.Sprintf(`(e => e === null ? null : e.innerText)(document.querySelector(%q))`, sel)
	s, err := chromedp.Run(ctx, chromedp.Evaluate[*string](js))
	require.NoError(t, err)
	require.NotNil(t, s, "no element %s on the page", sel)
	return *s
}

// waitVisible waits until the first element sel matches is rendered, asking the page's own
// JavaScript each time, so no node id is held across a live update or a navigation; the
// test's deadline bounds the wait.
func waitVisible(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	js := fmt.Sprintf(`(e => e !== null && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden")(document.querySelector(%q))`, sel)
	for {
		visible, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err == nil && visible {
			return
		}
		require.NoError(t, ctx.Err(), "%s never showed: %v", sel, err)
		time.Sleep(20 * time.Millisecond)
	}
}

// leave runs steps that end by leaving the page (a submit, a click on a link or a button) and
// returns once the page they lead to has loaded. The page it starts on is marked first, and the
// wait ends only in a document without the mark whose loading is complete, so what comes after
// finds the new page's nodes, never those of the page on its way out.
func leave(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.atmostLeaving = true`))
	require.NoError(t, err)
	require.NoError(t, chromedp.Do(ctx, steps...))
	for {
		// While the navigation lands the old document's context can be gone: an error is
		// "not yet", and the test's own deadline bounds the wait.
		arrived, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.atmostLeaving !== true && document.readyState === "complete"`))
		if err == nil && arrived {
			return
		}
		require.NoError(t, ctx.Err(), "the page was not left: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
}

// fetchStatus posts a form from the page with the browser's own cookies and returns the status.
func fetchStatus(t *testing.T, ctx context.Context, path string, form map[string]string) int {
	t.Helper()
	var parts []string
	for k, v := range form {
		parts = append(parts, fmt.Sprintf("%q:%q", k, v))
	}
	js := fmt.Sprintf(`fetch(%q, {method: "POST", body: new URLSearchParams({%s}), redirect: "manual"}).then(r => r.status)`, path, strings.Join(parts, ","))
	status, err := chromedp.Run(ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
	require.NoError(t, err)
	return status
}

// A person logs in, reads the overview, finds a parked intent by filter, opens it, resolves it
// and sees the new history row and its event; then resolves the rest of that filter in bulk,
// and looks at the controls. A forged change and one without the session change nothing, and
// a visitor without a session sees nothing of the ledger.
func TestAPersonResolvesParkedIntentsInABrowser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	var parked []identity.DeliveryKey
	for i, text := range []string{"Launch post for the spring sale", "Reply to @ana about shipping", "Weekly digest #41", "Thread: how at-most-once works"} {
		account := "acct-b"
		if i == 3 {
			account = "acct-a"
		}
		parked = append(parked, h.parkedNotFound(account, text))
	}
	for _, text := range []string{"Good morning", "New blog post is up", "Thanks for 10k followers"} {
		h.published("acct-a", text)
	}
	failed := h.failed("acct-a", "Maintenance window tonight")
	target := parked[0]
	ctx := browser(t)

	// Without a session: the login page, and nothing of the ledger.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/intents/"+target.String()), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`))))
	loc, err := chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	body, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	require.NoError(t, err)
	require.Contains(t, loc, "/login")
	// (The key is in the login's way back, as the visitor typed it; nothing the ledger holds is.)
	for _, secret := range []string{"acct-b", "spring sale", "parked", "reconcile_not_found"} {
		require.NotContains(t, body, secret)
	}
	shot(t, ctx, "login")

	// Log in; back to the page asked for.
	leave(t, ctx, chromedp.SendKeys(chromedp.CSS(`input[name=token]`), h.operatorToken("alice", ledger.RoleOperator)),
		chromedp.Submit(chromedp.CSS(`form`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#history`)),
		chromedp.Navigate(h.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#overview-body`))))
	waiting := text(t, ctx, `#overview-body`)
	require.Contains(t, waiting, "reconcile_not_found")
	require.Contains(t, waiting, "Waiting")
	require.Contains(t, text(t, ctx, `header .who span`), "alice")
	shot(t, ctx, "overview")

	// Find the parked intents of acct-b by filter.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/intents"), chromedp.WaitVisible(chromedp.CSS(`form.filters`))))
	leave(t, ctx, chromedp.SetValue(chromedp.CSS(`select[name=state]`), "parked"),
		chromedp.SetValue(chromedp.CSS(`select[name=reason]`), "reconcile_not_found"),
		chromedp.SetValue(chromedp.CSS(`select[name=account]`), "acct-b"),
		chromedp.Submit(chromedp.CSS(`form.filters`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`table.list`))))
	loc, err = chromedp.Run(ctx, chromedp.Location())
	require.NoError(t, err)
	require.Contains(t, loc, "account=acct-b")
	list := text(t, ctx, `table.list tbody`)
	require.Equal(t, 3, strings.Count(list, "reconcile_not_found"), list)
	require.NotContains(t, list, "acct-a")
	shot(t, ctx, "intents")

	// Open it and resolve it as failed, with the evidence.
	leave(t, ctx, chromedp.Click(chromedp.CSS(`a[href="/intents/`+target.String()+`"]`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#resolve-failed`))))
	require.Contains(t, text(t, ctx, `blockquote.text`), "Launch post for the spring sale")
	shot(t, ctx, "intent")
	leave(t, ctx, chromedp.SendKeys(chromedp.CSS(`#resolve-failed input[name=note]`), "not on the profile at 10:02; the platform's log shows no request"),
		chromedp.Submit(chromedp.CSS(`#resolve-failed`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#confirm`))))
	require.Contains(t, text(t, ctx, `ul.effect`), "parked (reconcile_not_found) → failed (operator_failed)")
	require.Equal(t, ledger.Parked, h.Intent(target).State, "the preview changed nothing")
	shot(t, ctx, "confirm")
	leave(t, ctx, chromedp.Click(chromedp.CSS(`#confirm`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`p.flash`))))
	require.Contains(t, text(t, ctx, `p.flash`), "Resolve as failed: done, by console:alice")
	hist := text(t, ctx, `#history li:last-child`)
	require.Contains(t, hist, "failed")
	require.Contains(t, hist, "operator_failed")
	require.Contains(t, hist, "console:alice")
	require.Contains(t, text(t, ctx, `#events tbody tr:last-child`), "on ATMOST_EVENTS")
	in := h.Intent(target)
	require.Equal(t, ledger.Failed, in.State)
	shot(t, ctx, "intent-resolved")

	// A forged change (a wrong CSRF token) is refused, and changes nothing.
	csrf, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`form.who input[name=csrf]`)))
	require.NoError(t, err)
	require.Equal(t, 403, fetchStatus(t, ctx, "/intents/"+failed.String()+"/act", map[string]string{"verb": "park", "note": "forged", "csrf": "not-the-token"}))
	require.Equal(t, ledger.Failed, h.Intent(failed).State)

	// The rest of the filter in bulk: the count and a sample first, then each one.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/bulk?state=parked&reason=reconcile_not_found&account=acct-b"),
		chromedp.WaitVisible(chromedp.CSS(`#bulk-action select[name=verb]`))))
	require.Equal(t, "All 2 that match", text(t, ctx, `#bulk-count`))
	leave(t, ctx, chromedp.SetValue(chromedp.CSS(`#bulk-action select[name=verb]`), "resolve-failed"),
		chromedp.SendKeys(chromedp.CSS(`#bulk-action input[name=note]`), "none of these is on the profile (checked 10:05)"),
		chromedp.Submit(chromedp.CSS(`#bulk-action`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#confirm`))))
	require.Contains(t, text(t, ctx, `h1`), "Resolve as failed: 2 intents")
	shot(t, ctx, "bulk-preview")
	leave(t, ctx, chromedp.Click(chromedp.CSS(`#confirm`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#changed`))))
	require.Equal(t, "2", text(t, ctx, `#changed`))
	require.Equal(t, "0", text(t, ctx, `#refused`))
	shot(t, ctx, "bulk-result")
	for _, k := range parked[:3] {
		require.Equal(t, ledger.Failed, h.Intent(k).State)
	}
	require.Equal(t, ledger.Parked, h.Intent(parked[3]).State, "acct-a's was not in the filter")

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/controls"), chromedp.WaitVisible(chromedp.CSS(`#switches`))))
	shot(t, ctx, "controls")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#overview-body`))))

	// Logged out, the right CSRF token is worth nothing: no session, no change.
	leave(t, ctx, chromedp.Click(chromedp.CSS(`form.who button`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`input[name=token]`))))
	require.Equal(t, 401, fetchStatus(t, ctx, "/intents/"+parked[3].String()+"/act", map[string]string{"verb": "resolve", "to": "failed", "note": "no session", "csrf": csrf}))
	require.Equal(t, ledger.Parked, h.Intent(parked[3]).State)
}

// A person replays a reject from its row once its account exists, then the rest of an account's
// by filter: each previewed as a dry run (the counts, the first rejects), nothing changed before
// the confirmation, the created intents pending under the person's name, their events and work
// items published.
func TestAPersonReplaysRejectsInABrowser(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	first := h.refuse("acct-9", "Hello from the new account")[0]
	later := h.refuse("acct-7", "Spring sale starts Monday", "Store hours for the holidays")
	h.refuse("acct-9", "Second post of the new account")
	h.addAccount("acct-9")
	h.addAccount("acct-7")
	rejects, err := h.Ledger.Rejects(h.Ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, rejects, 4)
	var row string
	for _, r := range rejects {
		if r.StreamSeq == 1 {
			row = `#reject-` + r.ID
		}
	}
	require.NotEmpty(t, row)
	ctx := browser(t)

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/rejects"), chromedp.WaitVisible(chromedp.CSS(`input[name=token]`))))
	leave(t, ctx, chromedp.SendKeys(chromedp.CSS(`input[name=token]`), h.operatorToken("alice", ledger.RoleOperator)),
		chromedp.Submit(chromedp.CSS(`form`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#rejects`))))
	require.Equal(t, 4, strings.Count(text(t, ctx, `#rejects tbody`), "unknown_account"))
	shot(t, ctx, "rejects")

	// One reject, from its row.
	leave(t, ctx, chromedp.SendKeys(chromedp.CSS(row+` input[name=note]`), "acct-9 added (OPS-7)"),
		chromedp.Submit(chromedp.CSS(row+` form.replay-one`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#confirm`))))
	require.Equal(t, "1", text(t, ctx, `#n-created`))
	require.Contains(t, text(t, ctx, `table.replayed`), "acct-9")
	require.Zero(t, h.Count(`SELECT count(*) FROM intents`), "the preview changed nothing")
	shot(t, ctx, "replay-preview")
	leave(t, ctx, chromedp.Click(chromedp.CSS(`#confirm`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#replay-summary`))))
	require.Equal(t, "1", text(t, ctx, `#created`))
	require.Contains(t, text(t, ctx, `#replay-event`), "published right away")
	in := h.Intent(first)
	require.Equal(t, ledger.Pending, in.State)
	require.Equal(t, "console:alice", history(h, first)[0].Actor)
	require.Equal(t, 1, h.Count(`SELECT count(*) FROM intents`), "the other acct-9 reject was not in the replay")

	// acct-7's, by filter.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(h.srv.URL+"/rejects"), chromedp.WaitVisible(chromedp.CSS(`#replay-filter`))))
	leave(t, ctx, chromedp.SetValue(chromedp.CSS(`#replay-filter select[name=reason]`), "unknown_account"),
		chromedp.SendKeys(chromedp.CSS(`#replay-filter input[name=account]`), "acct-7"),
		chromedp.SendKeys(chromedp.CSS(`#replay-filter input[name=note]`), "acct-7 added (OPS-8)"),
		chromedp.Submit(chromedp.CSS(`#replay-filter`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#confirm`))))
	require.Contains(t, text(t, ctx, `h1`), "Replay 2 rejects")
	require.Equal(t, "2", text(t, ctx, `#n-created`))
	leave(t, ctx, chromedp.Click(chromedp.CSS(`#confirm`)))
	require.NoError(t, chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#replay-summary`))))
	require.Equal(t, "2", text(t, ctx, `#created`))
	shot(t, ctx, "replay-result")
	for _, k := range later {
		require.Equal(t, ledger.Pending, h.Intent(k).State)
	}
	require.Equal(t, 3, h.Count(`SELECT count(*) FROM intents`))
	require.Zero(t, h.Count(`SELECT count(*) FROM outbox`), "every event and work item published")
	require.Equal(t, 3, h.replays())
}
