package bluesky_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

// send prepares r and sends it once.
func send(t *testing.T, ad platform.Adapter, r platform.Request) (platform.Prepared, platform.Outcome) {
	t.Helper()
	p, err := ad.Prepare(r)
	require.NoError(t, err)
	return p, ad.Send(ctx(t), p)
}

// requireClean fails when the outcome's detail shows the password or a token.
func requireClean(t *testing.T, pds *fakePDS, out platform.Outcome) {
	t.Helper()
	b, err := json.Marshal(out)
	require.NoError(t, err)
	pds.noSecret(t, string(b))
	pds.noSecret(t, fmt.Sprint(out.Detail))
}

func createRecordCalls(pds *fakePDS) []seen {
	var out []seen
	for _, s := range pds.requests() {
		if s.Method == "com.atproto.repo.createRecord" {
			out = append(out, s)
		}
	}
	return out
}

// The first send logs in once (createSession with the identifier and the app password), then
// makes one createRecord: the prepared bytes, with the access token as Bearer. The record is
// named by its at-uri, under the derived key. Later sends reuse the session.
func TestASendLogsInOnceAndCreatesTheRecord(t *testing.T) {
	c := newClock(t0)
	pds := newPDS(t, c)
	ad := open(t, pds.URL, c)
	r := postRequest(t)
	p, out := send(t, ad, r)
	require.Equal(t, platform.Sent, out.Result, out.Detail)
	rkey := bluesky.RecordKey(r.Key)
	require.Equal(t, "at://"+did+"/app.bsky.feed.post/"+rkey, out.ObjectID)
	require.Empty(t, out.Reason)
	require.Equal(t, rkey, out.Detail["rkey"])
	require.Equal(t, "app.bsky.feed.post", out.Detail["collection"])
	requireClean(t, pds, out)

	got := pds.requests()
	require.Equal(t, []string{"com.atproto.server.createSession", "com.atproto.repo.createRecord"}, pds.methods())
	login := got[0]
	require.Equal(t, "POST", login.HTTP)
	require.JSONEq(t, `{"identifier":"`+did+`","password":"`+password+`"}`, string(login.Body))
	require.Empty(t, login.Header.Get("Authorization"))
	require.Equal(t, "application/json", login.Header.Get("Content-Type"))

	create := got[1]
	require.Equal(t, "POST", create.HTTP)
	require.Equal(t, p.Body, create.Body, "exactly the prepared bytes")
	require.Equal(t, `{"repo":"`+did+`","collection":"app.bsky.feed.post","rkey":"`+rkey+`","record":{"$type":"app.bsky.feed.post","text":"`+postText+`","langs":["en"],`+createdAt+`}}`,
		string(create.Body))
	require.Equal(t, "Bearer "+pds.access, create.Header.Get("Authorization"))
	require.Equal(t, "application/json", create.Header.Get("Content-Type"))
	require.Empty(t, create.Header.Get("Idempotency-Key"))

	// Another intent: the same session, one more createRecord.
	r2 := postRequest(t)
	r2.Key = keyN(t, 2)
	_, out = send(t, ad, r2)
	require.Equal(t, platform.Sent, out.Result)
	require.Equal(t, 1, pds.count("com.atproto.server.createSession"))
	require.Equal(t, 2, pds.count("com.atproto.repo.createRecord"))
	require.Equal(t, 2, pds.recordCount())
}

// The reference PDS answers a create under a taken key with a 500 (its repository tree throws
// "There is already a value at key"): unknown, never a second record.
func TestASecondCreateUnderTheSameKeyIsUnknown(t *testing.T) {
	c := newClock(t0)
	pds := newPDS(t, c)
	ad := open(t, pds.URL, c)
	_, out := send(t, ad, postRequest(t))
	require.Equal(t, platform.Sent, out.Result)
	c.add(time.Minute)
	_, out = send(t, ad, postRequest(t))
	require.Equal(t, platform.Unknown, out.Result)
	require.Equal(t, platform.ReasonSendUnknown, out.Reason)
	require.Equal(t, 500, out.Detail["status"])
	require.Equal(t, "InternalServerError", out.Detail["xrpc_error"])
	require.Equal(t, 1, pds.recordCount())
	require.Len(t, createRecordCalls(pds), 2)
	requireClean(t, pds, out)
}

// A PDS that says, with a 4xx, that the record already exists is telling that an earlier
// attempt created it: unknown (the lookup will find it), never not-sent, although 400 is
// otherwise definitive.
func TestARefusalSayingTheRecordExistsIsUnknown(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
	}{
		{400, `{"error":"RecordAlreadyExists","message":"record already exists"}`},
		{400, `{"error":"InvalidRequest","message":"Record already exists at at://did:plc:x/app.bsky.feed.post/3abc"}`},
		{400, `{"error":"InvalidRequest","message":"There is already a value at key: app.bsky.feed.post/3abc"}`},
		{409, `{"error":"Conflict","message":"duplicate record key"}`},
	} {
		clk := newClock(t0)
		pds := newPDS(t, clk)
		ad := open(t, pds.URL, clk)
		pds.on("com.atproto.repo.createRecord", c.status, c.body)
		_, out := send(t, ad, postRequest(t))
		require.Equal(t, platform.Unknown, out.Result, c.body)
		require.Equal(t, platform.ReasonSendUnknown, out.Reason, c.body)
		require.Equal(t, true, out.Detail["rkey_conflict"], c.body)
		require.Equal(t, c.status, out.Detail["status"])
	}
}

// RecordAlreadyExists is recognised by the XRPC error name alone: a PDS whose message says
// nothing of it (another wording, another language, none) still says the record exists.
func TestARecordAlreadyExistsIsRecognisedByItsErrorName(t *testing.T) {
	for _, body := range []string{
		`{"error":"RecordAlreadyExists","message":"Der Datensatz ist bereits vorhanden"}`,
		`{"error":"RecordAlreadyExists","message":"Invalid request"}`,
		`{"error":"RecordAlreadyExists"}`,
	} {
		clk := newClock(t0)
		pds := newPDS(t, clk)
		ad := open(t, pds.URL, clk)
		pds.on("com.atproto.repo.createRecord", 400, body)
		_, out := send(t, ad, postRequest(t))
		require.Equal(t, platform.Unknown, out.Result, body)
		require.Equal(t, platform.ReasonSendUnknown, out.Reason, body)
		require.Equal(t, true, out.Detail["rkey_conflict"], body)
		require.Equal(t, "RecordAlreadyExists", out.Detail["xrpc_error"], body)
	}
}

// Every ending of the createRecord, classified by the transport's table with the adapter's
// definitive statuses.
func TestEveryEndingOfACreateIsClassified(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
		result platform.Result
		reason platform.Reason
		xrpc   string
	}{
		{"400 InvalidRequest", 400, `{"error":"InvalidRequest","message":"Invalid app.bsky.feed.post record: Record/text must not be longer than 300 graphemes"}`, platform.NotSent, platform.ReasonPlatformRejected, "InvalidRequest"},
		{"400 InvalidRecord", 400, `{"error":"InvalidRecord","message":"Invalid record"}`, platform.NotSent, platform.ReasonPlatformRejected, "InvalidRecord"},
		{"400 InvalidSwap", 400, `{"error":"InvalidSwap","message":"Commit was at bafy..."}`, platform.NotSent, platform.ReasonPlatformRejected, "InvalidSwap"},
		{"400 without a body", 400, ``, platform.NotSent, platform.ReasonPlatformRejected, ""},
		{"401 AuthenticationRequired", 401, `{"error":"AuthenticationRequired","message":"Authentication Required"}`, platform.NotSent, platform.ReasonPlatformRejected, "AuthenticationRequired"},
		{"403 Forbidden", 403, `{"error":"Forbidden","message":"Forbidden"}`, platform.NotSent, platform.ReasonPlatformRejected, "Forbidden"},
		{"413 PayloadTooLarge", 413, `{"error":"PayloadTooLarge","message":"request entity too large"}`, platform.NotSent, platform.ReasonPlatformRejected, "PayloadTooLarge"},
		{"429 RateLimitExceeded", 429, `{"error":"RateLimitExceeded","message":"Rate Limit Exceeded"}`, platform.NotSent, platform.ReasonPlatformRejected, "RateLimitExceeded"},
		{"404 XRPCNotSupported", 404, `{"error":"XRPCNotSupported","message":"XRPCNotSupported"}`, platform.Unknown, platform.ReasonSendUnknown, "XRPCNotSupported"},
		{"500 InternalServerError", 500, `{"error":"InternalServerError","message":"Internal Server Error"}`, platform.Unknown, platform.ReasonSendUnknown, "InternalServerError"},
		{"502 UpstreamFailure", 502, `{"error":"UpstreamFailure","message":"Upstream Failure"}`, platform.Unknown, platform.ReasonSendUnknown, "UpstreamFailure"},
		{"503 NotEnoughResources", 503, `{"error":"NotEnoughResources","message":"Not Enough Resources"}`, platform.Unknown, platform.ReasonSendUnknown, "NotEnoughResources"},
		{"504 from a proxy, HTML", 504, `<html>Gateway Timeout</html>`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"307 is never followed", 307, ``, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"200 without a cid", 200, `{"uri":"at://` + did + `/app.bsky.feed.post/3abc"}`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"200 without a uri", 200, `{"cid":"bafyrei"}`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"200 with a uri that names no record", 200, `{"uri":"at://` + did + `","cid":"bafyrei"}`, platform.Unknown, platform.ReasonSendUnknown, ""},
		{"200 not JSON", 200, `ok`, platform.Unknown, platform.ReasonSendUnknown, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := newClock(t0)
			pds := newPDS(t, clk)
			ad := open(t, pds.URL, clk)
			if c.status == 307 {
				pds.onFunc("com.atproto.repo.createRecord", func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, "/xrpc/com.atproto.repo.createRecord?again=1", http.StatusTemporaryRedirect)
				})
			} else {
				pds.on("com.atproto.repo.createRecord", c.status, c.body)
			}
			_, out := send(t, ad, postRequest(t))
			require.Equal(t, c.result, out.Result, out.Detail)
			require.Equal(t, c.reason, out.Reason)
			require.Equal(t, c.status, out.Detail["status"])
			require.Empty(t, out.ObjectID)
			if c.xrpc != "" {
				require.Equal(t, c.xrpc, out.Detail["xrpc_error"])
			} else {
				require.NotContains(t, out.Detail, "xrpc_error")
			}
			require.Len(t, createRecordCalls(pds), 1, "one createRecord, never followed or repeated")
			require.Zero(t, pds.recordCount())
			requireClean(t, pds, out)
		})
	}
}

// The PDS read the whole createRecord and the connection died before an answer: the record
// may exist. Unknown, and the request was not sent again.
func TestAConnectionDroppedAfterTheRequestIsUnknown(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	pds.onFunc("com.atproto.repo.createRecord", func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		require.NoError(t, err)
		_ = conn.Close()
	})
	p, out := send(t, ad, postRequest(t))
	require.Equal(t, platform.Unknown, out.Result)
	require.Equal(t, platform.ReasonSendUnknown, out.Reason)
	require.NotContains(t, out.Detail, "status")
	calls := createRecordCalls(pds)
	require.Len(t, calls, 1, "net/http did not replay it")
	require.Equal(t, p.Body, calls[0].Body, "the PDS received the whole request")
	requireClean(t, pds, out)
}

// With a session held and the PDS gone, the createRecord's connection is refused before any
// byte: not sent.
func TestARefusedConnectionIsNotSent(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	_, out := send(t, ad, postRequest(t))
	require.Equal(t, platform.Sent, out.Result)
	pds.Close()
	bluesky.CloseIdle(ad) // else the send rides a connection the server closed: unknown, rightly
	r := postRequest(t)
	r.Key = keyN(t, 2)
	_, out = send(t, ad, r)
	require.Equal(t, platform.NotSent, out.Result, out.Detail)
	require.Equal(t, platform.ReasonConnectionFailed, out.Reason)
	require.Equal(t, "none", out.Detail["step"])
}

// No session can be had: nothing of the createRecord left. A refusal of the password is
// platform_rejected, an unreachable PDS connection_failed; neither shows the password.
func TestASendWithoutASessionIsNotSent(t *testing.T) {
	t.Run("wrong password", func(t *testing.T) {
		clk := newClock(t0)
		pds := newPDS(t, clk)
		pds.password = "another"
		ad := open(t, pds.URL, clk)
		_, out := send(t, ad, postRequest(t))
		require.Equal(t, platform.NotSent, out.Result)
		require.Equal(t, platform.ReasonPlatformRejected, out.Reason)
		require.Equal(t, "session", out.Detail["step"])
		require.Equal(t, "com.atproto.server.createSession", out.Detail["session_call"])
		require.Equal(t, 401, out.Detail["status"])
		require.Equal(t, "AuthenticationRequired", out.Detail["xrpc_error"])
		require.Empty(t, createRecordCalls(pds))
		requireClean(t, pds, out)
	})
	t.Run("account taken down", func(t *testing.T) {
		clk := newClock(t0)
		pds := newPDS(t, clk)
		pds.on("com.atproto.server.createSession", 401, `{"error":"AccountTakedown","message":"Account has been taken down"}`)
		ad := open(t, pds.URL, clk)
		_, out := send(t, ad, postRequest(t))
		require.Equal(t, platform.NotSent, out.Result)
		require.Equal(t, "AccountTakedown", out.Detail["xrpc_error"])
		require.Empty(t, createRecordCalls(pds))
	})
	t.Run("PDS unreachable", func(t *testing.T) {
		clk := newClock(t0)
		pds := newPDS(t, clk)
		url := pds.URL
		pds.Close()
		ad := open(t, url, clk)
		_, out := send(t, ad, postRequest(t))
		require.Equal(t, platform.NotSent, out.Result)
		require.Equal(t, platform.ReasonConnectionFailed, out.Reason)
		require.Equal(t, "session", out.Detail["step"])
		requireClean(t, pds, out)
	})
}

// The PDS refuses the access token (400 ExpiredToken): that send is not sent (the auth check
// precedes the handler), and the next one refreshes the session (refreshSession with the
// refresh token as Bearer and no body) before its createRecord.
func TestAnExpiredTokenIsRefreshedForTheNextSend(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	_, out := send(t, ad, postRequest(t))
	require.Equal(t, platform.Sent, out.Result)
	refresh := pds.refresh

	pds.expireAccess()
	r := postRequest(t)
	r.Key = keyN(t, 2)
	_, out = send(t, ad, r)
	require.Equal(t, platform.NotSent, out.Result)
	require.Equal(t, platform.ReasonPlatformRejected, out.Reason)
	require.Equal(t, "ExpiredToken", out.Detail["xrpc_error"])
	requireClean(t, pds, out)

	_, out = send(t, ad, r)
	require.Equal(t, platform.Sent, out.Result, out.Detail)
	require.Equal(t, []string{"com.atproto.server.createSession", "com.atproto.repo.createRecord",
		"com.atproto.repo.createRecord", "com.atproto.server.refreshSession", "com.atproto.repo.createRecord"}, pds.methods())
	got := pds.requests()
	require.Equal(t, "Bearer "+refresh, got[3].Header.Get("Authorization"))
	require.Empty(t, got[3].Body, "refreshSession takes no input")
	require.Equal(t, "Bearer "+pds.access, got[4].Header.Get("Authorization"), "the new access token")
	require.Equal(t, 1, pds.count("com.atproto.server.createSession"))
}

// A 401 marks the session for renewal too.
func TestA401RenewsTheSession(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	pds.on("com.atproto.repo.createRecord", 401, `{"error":"AuthenticationRequired","message":"Token could not be verified"}`)
	_, out := send(t, ad, postRequest(t))
	require.Equal(t, platform.NotSent, out.Result)
	_, out = send(t, ad, postRequest(t))
	require.Equal(t, platform.Sent, out.Result)
	require.Equal(t, []string{"com.atproto.server.createSession", "com.atproto.repo.createRecord",
		"com.atproto.server.refreshSession", "com.atproto.repo.createRecord"}, pds.methods())
}

// An access token about to expire is refreshed before the send, so the send is not refused.
func TestAnAccessTokenAboutToExpireIsRefreshedFirst(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	_, out := send(t, ad, postRequest(t))
	require.Equal(t, platform.Sent, out.Result)

	clk.add(2*time.Hour - 30*time.Second) // the token expires in 30 s: inside the margin
	r := postRequest(t)
	r.Key = keyN(t, 2)
	_, out = send(t, ad, r)
	require.Equal(t, platform.Sent, out.Result)
	require.Equal(t, []string{"com.atproto.server.createSession", "com.atproto.repo.createRecord",
		"com.atproto.server.refreshSession", "com.atproto.repo.createRecord"}, pds.methods())
}

// A refresh token the PDS refuses leads to a new login; a PDS that cannot be asked does not.
func TestARefusedRefreshLogsInAgain(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	_, out := send(t, ad, postRequest(t))
	require.Equal(t, platform.Sent, out.Result)

	clk.add(3 * time.Hour)
	pds.on("com.atproto.server.refreshSession", 503, `{"error":"NotEnoughResources","message":"busy"}`)
	r := postRequest(t)
	r.Key = keyN(t, 2)
	_, out = send(t, ad, r)
	require.Equal(t, platform.NotSent, out.Result)
	require.Equal(t, "com.atproto.server.refreshSession", out.Detail["session_call"])
	require.Equal(t, 1, pds.count("com.atproto.server.createSession"), "no login while the PDS is failing")

	pds.on("com.atproto.server.refreshSession", 400, `{"error":"ExpiredToken","message":"Token has expired"}`)
	_, out = send(t, ad, r)
	require.Equal(t, platform.Sent, out.Result, out.Detail)
	require.Equal(t, 2, pds.count("com.atproto.server.createSession"))
}

// Concurrent sends share one login.
func TestConcurrentSendsShareOneSession(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	var wg sync.WaitGroup
	outs := make([]platform.Outcome, 16)
	for i := range outs {
		r := postRequest(t)
		r.Key = keyN(t, 100+i)
		p, err := ad.Prepare(r)
		require.NoError(t, err)
		wg.Go(func() { outs[i] = ad.Send(ctx(t), p) })
	}
	wg.Wait()
	for _, out := range outs {
		require.Equal(t, platform.Sent, out.Result, out.Detail)
	}
	require.Equal(t, 1, pds.count("com.atproto.server.createSession"))
	require.Equal(t, 16, pds.recordCount())
}

// A prepared request changed after Prepare is not sent at all.
func TestATamperedPreparedRequestIsNotSent(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	p, err := ad.Prepare(postRequest(t))
	require.NoError(t, err)
	p.Body = []byte(`{"repo":"` + did + `","collection":"app.bsky.feed.post","record":{"text":"other"}}`)
	out := ad.Send(ctx(t), p)
	require.Equal(t, platform.NotSent, out.Result)
	require.Empty(t, pds.requests(), "not even a session call")
}
