package console_test

import (
	"html"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// An intent's page shows the runbook of its reason, the one docs/operators.md holds, and an
// indeterminate intent's page says when its one lookup is due.
func TestTheIntentPageShowsTheRunbookOfItsReason(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	r := h.realistic()
	c := h.client()
	c.login("alice")
	for key, want := range map[string][]string{
		r.notFound.String():    {"The runbook for <code>reconcile_not_found</code>", "<b>Check</b> the account&#39;s profile or feed", "Fits: Resolve as published, Not sent, send again, Resolve as failed."},
		r.unavailable.String(): {"The runbook for <code>reconcile_unavailable</code>", "there is no second automatic lookup"},
		r.operator.String():    {"The runbook for <code>operator_parked</code>", "whatever that person meant"},
		r.exhausted.String():   {"The runbook for <code>attempts_exhausted</code>", "raise the cap if it was too low", "it has used 1 of its account&#39;s attempt cap of 1"},
		r.unsendable.String():  {"The runbook for <code>request_unsendable</code>", "tell the producer", "the runbook of request_unsendable does not send it again"},
		r.indeterminate.String(): {"The runbook for <code>send_unknown</code>", "the lookup decides", `id="lookup-due"`, "the account&#39;s reconcile delay of 2s after it became indeterminate",
			"the sweeper&#39;s --unreconciled-after"},
	} {
		code, body := c.get("/intents/" + key)
		require.Equal(t, http.StatusOK, code)
		for _, w := range want {
			require.Contains(t, body, w, key)
		}
	}
	_, body := c.get("/intents/" + r.notFound.String())
	require.Contains(t, body, `id="resend"`)
	_, body = c.get("/intents/" + r.failed.String())
	require.NotContains(t, body, "The runbook for", "a failed intent waits for no person")
	require.NotContains(t, body, `id="resend"`)
}

// "Not sent, send again" resolves a parked intent as failed and retries it, in one preview and
// one confirmation, each step a history row under the operator; it is refused, changing
// nothing, where the runbook does not send the reason again or the retry would meet the cap.
func TestNotSentSendAgainResolvesThenRetriesInOneConfirmation(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	r := h.realistic()
	c := h.client()
	csrf := c.login("alice")

	path := "/intents/" + r.notFound.String() + "/act"
	form := values("csrf", csrf, "verb", "resend", "note", "not on the profile at 10:02")
	before := len(history(h, r.notFound))
	confirm, body := c.preview(path, form)
	require.Contains(t, html.UnescapeString(body), "parked (reconcile_not_found) → failed (operator_failed) → pending (retried)")
	require.Equal(t, ledger.Parked, h.Intent(r.notFound).State, "the preview changed nothing")
	code, _, _ := c.post(path, with(form, "confirm", confirm, "seq", field(t, seqField, body)))
	require.Equal(t, http.StatusSeeOther, code)
	in := h.Intent(r.notFound)
	require.Equal(t, ledger.Pending, in.State)
	require.Equal(t, ledger.ReasonRetried, in.Reason)
	rows := history(h, r.notFound)[before:]
	require.Len(t, rows, 2, "one history row a step")
	require.Equal(t, ledger.ReasonOperatorFailed, rows[0].Reason)
	require.Equal(t, ledger.ReasonRetried, rows[1].Reason)
	for _, row := range rows {
		require.Equal(t, "console:alice", row.Actor)
		require.Contains(t, string(row.Detail), "not on the profile at 10:02")
	}
	_, body = c.get("/intents/" + r.notFound.String())
	require.Contains(t, body, "Not sent, send again: done, by console:alice")

	// Where the runbook does not send it again, or the retry would meet the cap: refused at the
	// preview, and at a confirmation posted anyway, with nothing changed.
	for k, why := range map[identity.DeliveryKey]string{
		r.unsendable: "the runbook of request_unsendable does not send it again",
		r.exhausted:  "it has used 1 of its account&#39;s attempt cap of 1",
	} {
		key := k.String()
		n := len(history(h, k))
		p := "/intents/" + key + "/act"
		for _, f := range []map[string]string{{}, {"confirm": "forged", "seq": "1"}} {
			post := values("csrf", csrf, "verb", "resend", "note", "send it")
			for fk, fv := range f {
				post.Set(fk, fv)
			}
			code, _, _ := c.post(p, post)
			require.Equal(t, http.StatusSeeOther, code, key)
			_, body := c.get("/intents/" + key)
			require.Contains(t, body, "Nothing was changed: not sent, send again is not allowed now: "+why, key)
			require.Equal(t, ledger.Parked, h.Intent(k).State, key)
			require.Len(t, history(h, k), n, key)
		}
	}

	// Once the cap allows another attempt, the exhausted one is sent again.
	two := 2
	_, err := h.Ledger.SetPolicy(h.Ctx, longAccount, ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: &two}}, ledger.Actor{Name: "user:test", Reason: "one more attempt"})
	require.NoError(t, err)
	p := "/intents/" + r.exhausted.String() + "/act"
	form = values("csrf", csrf, "verb", "resend", "note", "the platform is back")
	confirm, body = c.preview(p, form)
	code, _, _ = c.post(p, with(form, "confirm", confirm, "seq", field(t, seqField, body)))
	require.Equal(t, http.StatusSeeOther, code)
	require.Equal(t, ledger.Pending, h.Intent(r.exhausted).State)
}
