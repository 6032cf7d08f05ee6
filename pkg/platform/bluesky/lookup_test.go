package bluesky_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

// The lookup reads the record under the intent's derived key: found after a send, not found
// (which proves nothing) when the PDS has none.
func TestTheLookupAnswersForTheIntentsKey(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	r := postRequest(t)
	rkey := bluesky.RecordKey(r.Key)

	lk := ad.Lookup(ctx(t), r)
	require.Equal(t, platform.NotFound, lk.Result, lk.Detail)
	require.False(t, lk.ProvenNotSent)
	require.Equal(t, "RecordNotFound", lk.Detail["xrpc_error"])
	require.Equal(t, rkey, lk.Detail["rkey"])
	read := pds.requests()[0]
	require.Equal(t, "com.atproto.repo.getRecord", read.Method)
	require.Equal(t, map[string]string{"repo": did, "collection": "app.bsky.feed.post", "rkey": rkey}, read.Query)
	require.Empty(t, read.Header.Get("Authorization"))
	require.Len(t, pds.requests(), 1, "a DID identifier needs no session to look up")

	_, out := send(t, ad, r)
	require.Equal(t, platform.Sent, out.Result)
	lk = ad.Lookup(ctx(t), r)
	require.Equal(t, platform.Found, lk.Result)
	require.Equal(t, out.ObjectID, lk.ObjectID)
	require.False(t, lk.ProvenNotSent)

	// Each action looks in its own collection.
	like := request(t, "like", postURI, `{"subject":{"uri":"`+postURI+`","cid":"`+postCID+`"}}`)
	lk = ad.Lookup(ctx(t), like)
	require.Equal(t, platform.NotFound, lk.Result)
	require.Equal(t, "app.bsky.feed.like", lk.Detail["collection"])
}

// A record the send created and someone deleted before the lookup (the account, a takedown,
// the duplicate-backlink rule) reads exactly as a create that never landed: RecordNotFound.
// So a not-found is no proof of not-sent, and the adapter declares no status lookup: the
// reconciler parks the intent for a person instead of failing it, which policy would retry
// into a second record.
func TestARecordDeletedBeforeTheLookupIsNoProofOfNotSent(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	require.False(t, ad.Capabilities().StatusLookup, "getRecord cannot prove not-sent")

	never := ad.Lookup(ctx(t), postRequest(t))

	r := request(t, "post", "", `{"text":"made, then deleted"}`)
	_, out := send(t, ad, r)
	require.Equal(t, platform.Sent, out.Result, out.Detail)
	require.Equal(t, platform.Found, ad.Lookup(ctx(t), r).Result)
	pds.remove(out.ObjectID)
	lk := ad.Lookup(ctx(t), r)
	require.Equal(t, platform.NotFound, lk.Result, lk.Detail)
	require.False(t, lk.ProvenNotSent, "a deleted record must not read as never sent")
	require.Equal(t, "RecordNotFound", lk.Detail["xrpc_error"])
	require.Contains(t, lk.Detail["why"], "proves nothing")

	require.Equal(t, platform.NotFound, never.Result, never.Detail)
	require.Equal(t, never.ProvenNotSent, lk.ProvenNotSent, "a create that never landed reads the same")
	require.Equal(t, 0, pds.recordCount())
	require.Equal(t, 1, pds.count("com.atproto.repo.createRecord"), "the lookup created nothing")
}

// Anything but a record or RecordNotFound is Unavailable: the PDS could not tell.
func TestALookupThatCannotTellIsUnavailable(t *testing.T) {
	r := postRequest(t)
	for _, c := range []struct {
		name   string
		status int
		body   string
	}{
		{"400 another error", 400, `{"error":"InvalidRequest","message":"Could not find repo: ` + did + `"}`},
		{"400 without a name", 400, `{"message":"Could not locate record"}`},
		{"401", 401, `{"error":"AuthenticationRequired","message":"x"}`},
		{"404", 404, `{"error":"XRPCNotSupported","message":"x"}`},
		{"429", 429, `{"error":"RateLimitExceeded","message":"x"}`},
		{"500", 500, `{"error":"InternalServerError","message":"x"}`},
		{"200 not a record", 200, `ok`},
		{"200 for another record", 200, `{"uri":"at://did:plc:other/app.bsky.feed.post/3abc","cid":"bafyrei","value":{}}`},
	} {
		clk := newClock(t0)
		pds := newPDS(t, clk)
		ad := open(t, pds.URL, clk)
		pds.on("com.atproto.repo.getRecord", c.status, c.body)
		lk := ad.Lookup(ctx(t), r)
		require.Equal(t, platform.Unavailable, lk.Result, c.name)
		require.False(t, lk.ProvenNotSent, c.name)
		require.Empty(t, lk.ObjectID, c.name)
	}

	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	pds.Close()
	lk := ad.Lookup(ctx(t), r)
	require.Equal(t, platform.Unavailable, lk.Result)
	require.False(t, lk.ProvenNotSent)

	lk = ad.Lookup(ctx(t), request(t, "delete", "", `{}`))
	require.Equal(t, platform.Unavailable, lk.Result)
}

// With a handle as identifier the lookup names the repository by the session's DID: a handle
// can move to another account.
func TestALookupByHandleUsesTheSessionsDID(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	t.Setenv(passwordEnv, password)
	ad, err := bluesky.Open(platform.Account{ID: "acct-1", Platform: bluesky.Name,
		Settings: json.RawMessage(`{"pds":"` + pds.URL + `","identifier":"` + handle + `"}`), CredentialRef: "env:" + passwordEnv})
	require.NoError(t, err)
	bluesky.SetClock(ad, clk.now)
	r := postRequest(t)
	lk := ad.Lookup(ctx(t), r)
	require.Equal(t, platform.NotFound, lk.Result, lk.Detail)
	require.False(t, lk.ProvenNotSent)
	require.Equal(t, []string{"com.atproto.server.createSession", "com.atproto.repo.getRecord"}, pds.methods())
	require.Equal(t, did, pds.requests()[1].Query["repo"])
	require.JSONEq(t, `{"identifier":"`+handle+`","password":"`+password+`"}`, string(pds.requests()[0].Body))
	b, _ := json.Marshal(lk)
	pds.noSecret(t, string(b))
}
