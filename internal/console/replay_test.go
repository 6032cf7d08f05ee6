package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/cli"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// refuse publishes intents for an account the ledger does not have, and has a real ingest
// refuse them: the rejects a replay reads are those ingest stored.
func (h *harness) refuse(account string, texts ...string) []identity.DeliveryKey {
	h.t.Helper()
	in, err := ingest.New(h.Ctx, h.JS, h.Ledger, ingest.Config{MaxWait: 100 * time.Millisecond})
	require.NoError(h.t, err)
	var keys []identity.DeliveryKey
	for _, text := range texts {
		body := fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":%q}}`, account, text)
		e, err := identity.ParseEnvelope([]byte(body))
		require.NoError(h.t, err)
		keys = append(keys, e.DeliveryKey())
		_, err = h.JS.PublishMsg(h.Ctx, &nats.Msg{Subject: events.IntentSubject(account), Data: []byte(body)})
		require.NoError(h.t, err)
	}
	rejected := 0
	for range 50 {
		s, err := in.Batch(h.Ctx)
		require.NoError(h.t, err)
		rejected += s.Rejected
		require.Zero(h.t, s.Created)
		if rejected == len(texts) {
			return keys
		}
	}
	h.t.Fatalf("ingest refused %d of %d", rejected, len(texts))
	return nil
}

// stored stores what ingest stores of a message it refused because account did not exist, as
// the message at seq of ATMOST_INTENTS, and returns the key of its envelope.
func (h *harness) stored(seq int64, account, text string) identity.DeliveryKey {
	h.t.Helper()
	body := fmt.Sprintf(`{"v":1,"account":%q,"action":"post","request":{"text":%q}}`, account, text)
	_, err := h.Ledger.Reject(h.Ctx, []ledger.Rejection{{Reason: string(identity.ReasonUnknownAccount), Detail: fmt.Sprintf("account %q is not configured", account),
		Subject: events.IntentSubject(account), Stream: events.IntentsStream, StreamSeq: seq, Raw: []byte(body)}})
	require.NoError(h.t, err)
	e, err := identity.ParseEnvelope([]byte(body))
	require.NoError(h.t, err)
	return e.DeliveryKey()
}

func (h *harness) addAccount(id string) {
	h.t.Helper()
	require.NoError(h.t, h.Ledger.AddAccount(h.Ctx, ledger.Account{ID: id, Platform: "sim", Settings: json.RawMessage(`{"url":"http://127.0.0.1:1"}`)}, ledger.Actor{Name: "test", Reason: "the producer's account, added late"}))
}

func (h *harness) replays() int {
	h.t.Helper()
	return h.Count(`SELECT count(*) FROM control_history WHERE kind = 'reject_replay'`)
}

var totalCell = regexp.MustCompile(`<td id="n-([a-z-]+)"[^>]*>(\d+)</td>`)

// previewTotals reads a replay preview's counts.
func previewTotals(t *testing.T, body string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range totalCell.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[2]
	}
	require.Len(t, out, 5, body)
	return out
}

func counts(created, already, refused, notReplayable, skipped int) map[string]string {
	return map[string]string{"created": fmt.Sprint(created), "already-stored": fmt.Sprint(already), "refused": fmt.Sprint(refused),
		"not-replayable": fmt.Sprint(notReplayable), "skipped": fmt.Sprint(skipped)}
}

// Rejects chosen by filter are replayed from the console as atmost rejects replay replays them:
// the preview is a dry run that changes nothing and shows the counts and the first rejects; the
// confirmation replays exactly the rejects previewed (one stored since waits) through the same
// ledger call, each written to the control history under the operator and the reason, and the
// created intents' events and work items go out at once. The confirmation is the preview's: a
// forged request, one for another change, or the confirmation used again changes nothing.
func TestRejectsReplayedByFilterArePreviewedThenReplayedOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	keys := []identity.DeliveryKey{h.stored(1, "acct-9", "nine one"), h.stored(3, "acct-9", "nine two")}
	other := h.stored(4, "acct-8", "eight")
	h.addAccount("acct-9")
	h.addAccount("acct-8")
	c := h.client()
	csrf := c.login("alice")
	_, body := c.get("/rejects")
	require.Contains(t, body, `action="/rejects/replay" class="replay-one"`)

	form := values("csrf", csrf, "reason", "unknown_account", "account", "acct-9", "note", "acct-9 added (OPS-7)")
	confirm, body := c.preview("/rejects/replay", form)
	require.Contains(t, body, "Replay 2 rejects")
	require.Equal(t, counts(2, 0, 0, 0, 0), previewTotals(t, body))
	require.Contains(t, body, `title="`+keys[0].String()+`: not stored (yet)"`, "a dry run's intent is not stored: no link")
	require.NotContains(t, body, other.String(), "acct-8's is not in the filter")
	require.Contains(t, body, "as console:alice: &#34;acct-9 added (OPS-7)&#34;")
	require.Zero(t, h.Count(`SELECT count(*) FROM intents`), "the preview changes nothing")
	require.Zero(t, h.replays())
	require.Zero(t, h.Count(`SELECT count(*) FROM outbox`))

	// The message between them is stored after the preview (the ingest instance that held it
	// crashed, and it was redelivered): the confirmation does not replay what was not seen.
	late := h.stored(2, "acct-9", "nine late")
	apply := with(form, "confirm", confirm)
	for name, f := range map[string]struct {
		form   map[string][]string
		status int
	}{
		"a wrong CSRF token":         {with(apply, "csrf", csrf+"x"), http.StatusForbidden},
		"no CSRF token":              {with(apply, "csrf", ""), http.StatusForbidden},
		"another reason":             {with(apply, "note", "something else"), http.StatusConflict},
		"another filter":             {with(apply, "account", ""), http.StatusConflict},
		"asked to replay them again": {with(apply, "again", "on"), http.StatusConflict},
	} {
		code, _, _ := c.post("/rejects/replay", f.form)
		require.Equal(t, f.status, code, name)
		require.Zero(t, h.Count(`SELECT count(*) FROM intents`), name)
		require.Zero(t, h.replays(), name)
	}

	code, body, _ := c.post("/rejects/replay", apply)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<b id="created">2</b> created`)
	require.Contains(t, body, "published right away on ATMOST_EVENTS and ATMOST_DISPATCH")
	for _, k := range keys {
		in := h.Intent(k)
		require.Equal(t, ledger.Pending, in.State)
		require.Equal(t, "acct-9", in.Account)
	}
	require.Equal(t, 2, h.Count(`SELECT count(*) FROM intents`), "not the one refused after the preview, nor acct-8's")
	require.Equal(t, 2, h.Count(`SELECT count(*) FROM history WHERE actor = 'console:alice' AND reason = 'submitted'`))
	require.Equal(t, 2, h.Count(`SELECT count(*) FROM control_history WHERE kind = 'reject_replay' AND actor = 'console:alice' AND reason = 'acct-9 added (OPS-7)'`))
	require.Zero(t, h.Count(`SELECT count(*) FROM outbox`), "published and gone from the outbox")
	dispatch, err := h.JS.Stream(h.Ctx, events.DispatchStream)

	require.NoError(t, err)
	info, err := dispatch.Info(h.Ctx)
	require.NoError(t, err)
	require.EqualValues(t, 2, info.State.Msgs, "a work item for each created intent")

	code, body, _ = c.post("/rejects/replay", apply)
	require.Equal(t, http.StatusConflict, code, "the confirmation is used")
	require.Contains(t, body, "Nothing was changed")
	require.Equal(t, 2, h.Count(`SELECT count(*) FROM intents`))
	require.Equal(t, 2, h.replays())

	// The next preview skips what was replayed, and finds the late one.
	_, body = c.preview("/rejects/replay", form)
	require.Equal(t, counts(1, 0, 0, 0, 2), previewTotals(t, body))
	require.Contains(t, body, late.String())
	require.Contains(t, body, `href="/intents/`+keys[0].String()+`"`, "a skipped reject's intent is stored: linked")
	require.Contains(t, body, "by console:alice")

	_, body = c.get("/controls")
	require.Contains(t, body, "acct-9 added (OPS-7)")
}

var replayRow = regexp.MustCompile(`<input type="hidden" name="id" value="([^"]+)"><input type="hidden" name="stream" value="([^"]+)"><input type="hidden" name="seq" value="(\d+)">`)

// One reject is replayed from its row: previewed, confirmed once, and a reject still refused
// is reported with the reason it has now and tried again by the next replay.
func TestOneRejectIsReplayedFromItsRow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.refuse("acct-9", "just this one")[0]
	c := h.client()
	csrf := c.login("bob")
	_, body := c.get("/rejects")
	m := replayRow.FindStringSubmatch(body)
	require.NotNil(t, m, body)
	row := values("csrf", csrf, "id", m[1], "stream", html.UnescapeString(m[2]), "seq", m[3], "note", "acct-9 exists now")

	// Still refused: the account is missing yet. The confirmation records that, and marks nothing.
	confirm, body := c.preview("/rejects/replay", row)
	require.Equal(t, counts(0, 0, 1, 0, 0), previewTotals(t, body))
	require.Contains(t, body, "unknown_account: account &#34;acct-9&#34; is not configured")
	code, body, _ := c.post("/rejects/replay", with(row, "confirm", confirm))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<b id="refused">1</b> refused again`)
	require.Equal(t, 1, h.replays())

	h.addAccount("acct-9")
	confirm, body = c.preview("/rejects/replay", row)
	require.Contains(t, body, "Replay one reject: message 1 of ATMOST_INTENTS")
	require.Equal(t, counts(1, 0, 0, 0, 0), previewTotals(t, body))
	require.Zero(t, h.Count(`SELECT count(*) FROM intents`))
	code, body, _ = c.post("/rejects/replay", with(row, "confirm", confirm))
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<b id="created">1</b> created`)
	require.Contains(t, body, "/intents/"+key.String())
	require.Equal(t, ledger.Pending, h.Intent(key).State)
	hist := history(h, key)
	require.Len(t, hist, 1)
	require.Equal(t, "console:bob", hist[0].Actor)

	code, _, _ = c.post("/rejects/replay", with(row, "confirm", confirm))
	require.Equal(t, http.StatusConflict, code)
	code, body, _ = c.post("/rejects/replay", row)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, counts(0, 0, 0, 0, 1), previewTotals(t, body))
	require.Contains(t, body, "nothing to confirm")
	require.NotContains(t, body, `name="confirm"`, "a replay that would do nothing has no confirmation")
	require.Equal(t, 1, h.Count(`SELECT count(*) FROM intents`))
	require.Equal(t, 2, h.replays())

	for name, f := range map[string]map[string][]string{
		"no reason":              with(row, "note", ""),
		"another reject's place": with(row, "seq", "2"),
	} {
		code, _, _ := c.post("/rejects/replay", f)
		require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, code, name)
	}
	require.Equal(t, 2, h.replays())
}

// A pending intent whose account cannot be served says so on its page, in the words and with
// the cause of atmost intents show (both from adapters.IntentWait); an account served again
// says nothing.
func TestTheIntentPageSaysWhyAPendingIntentWaits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testToken)
	key := h.Submit("acct-b", "held back")[0]
	failed := h.failed("acct-b", "not sent")
	c := h.client()
	c.login("alice")
	_, body := c.get("/intents/" + key.String())
	require.NotContains(t, body, `id="waiting"`)

	_, err := h.Ledger.SetAccountDisabled(h.Ctx, "acct-b", true, ledger.Actor{Name: "user:bob", Reason: "the platform asked us to pause"})
	require.NoError(t, err)
	var out bytes.Buffer
	code := cli.Run(context.Background(), cli.IO{Stdout: &out, Stderr: &out, Env: func(name string) (string, bool) {
		if name == "ATMOST_DATABASE_URL" {
			return h.DB.URL, true
		}
		return "", false
	}}, []string{"intents", "show", key.String(), "--json"})
	require.Equal(t, cli.ExitOK, code, out.String())
	var shown struct {
		Waiting struct{ Cause, Why string } `json:"waiting"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &shown))
	require.Equal(t, string(ledger.ReasonAccountDisabled), shown.Waiting.Cause)
	require.Regexp(t, `^account acct-b is disabled since \S+, by user:bob, reason: the platform asked us to pause$`, shown.Waiting.Why)

	_, body = c.get("/intents/" + key.String())
	require.Contains(t, body, `<p class="problem" id="waiting"><b>Waiting:</b> `+html.EscapeString(shown.Waiting.Why)+` <span class="cause">(account_disabled)</span></p>`)
	_, body = c.get("/intents/" + failed.String())
	require.NotContains(t, body, `id="waiting"`, "only a pending intent waits for its account: a failed one waits for a retry")

	// An adapter that does not open holds it too, once the account is enabled again.
	_, err = h.Ledger.SetAccountDisabled(h.Ctx, "acct-b", false, ledger.Actor{Name: "user:bob", Reason: "resumed"})
	require.NoError(t, err)
	_, body = c.get("/intents/" + key.String())
	require.NotContains(t, body, `id="waiting"`)
	h.Exec(`UPDATE accounts SET settings = '{}' WHERE account_id = 'acct-b'`)
	_, body = c.get("/intents/" + key.String())
	require.Contains(t, body, "its platform adapter does not open")
	require.Contains(t, body, "("+adapters.CauseAdapterUnavailable+")")
}
