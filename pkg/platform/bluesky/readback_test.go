package bluesky_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

// A sent post reads back with its text, by getRecord of the at-uri's repo, collection and key,
// without a credential.
func TestASentPostReadsBackWithItsText(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	r := postRequest(t)
	_, out := send(t, ad, r)
	require.Equal(t, platform.Sent, out.Result)
	obj, err := ad.ReadBack(ctx(t), r, out.ObjectID)
	require.NoError(t, err)
	require.Equal(t, platform.Object{ID: out.ObjectID, Text: postText}, obj)
	require.True(t, identity.SameText(obj.Text, r.Text))

	got := pds.requests()
	read := got[len(got)-1]
	require.Equal(t, "com.atproto.repo.getRecord", read.Method)
	require.Equal(t, "GET", read.HTTP)
	require.Equal(t, map[string]string{"repo": did, "collection": "app.bsky.feed.post", "rkey": bluesky.RecordKey(r.Key)}, read.Query)
	require.Empty(t, read.Header.Get("Authorization"))
}

// Every action reads back with the text platforms.RequestOf gives it: the post's text, or ""
// for a like, a repost and a follow.
func TestEveryActionReadsBack(t *testing.T) {
	parent := `{"uri":"` + postURI + `","cid":"` + postCID + `"}`
	root := `{"uri":"` + rootURI + `","cid":"` + rootCID + `"}`
	for _, c := range []struct{ action, target, request, text string }{
		{"reply", postURI, `{"parent":` + parent + `,"root":` + root + `,"text":"yes"}`, "yes"},
		{"quote", postURI, `{"subject":` + parent + `,"text":"look"}`, "look"},
		{"like", postURI, `{"subject":` + parent + `}`, ""},
		{"repost", postURI, `{"subject":` + parent + `}`, ""},
		{"follow", bobDID, `{}`, ""},
	} {
		clk := newClock(t0)
		pds := newPDS(t, clk)
		ad := open(t, pds.URL, clk)
		r := request(t, c.action, c.target, c.request)
		require.Equal(t, c.text, r.Text)
		_, out := send(t, ad, r)
		require.Equal(t, platform.Sent, out.Result, c.action)
		obj, err := ad.ReadBack(ctx(t), r, out.ObjectID)
		require.NoError(t, err, c.action)
		require.Equal(t, platform.Object{ID: out.ObjectID, Text: c.text}, obj, c.action)
	}
}

// A record under the intent's key that is not the one the intent describes reads back with a
// text that cannot match: the read-back fails (mismatch), a human decides.
func TestARecordThatIsNotTheRequestedOneDoesNotReadBack(t *testing.T) {
	parent := `{"uri":"` + postURI + `","cid":"` + postCID + `"}`
	for _, c := range []struct{ action, target, request, stored string }{
		{"like", postURI, `{"subject":` + parent + `}`, `{"$type":"app.bsky.feed.like","subject":{"uri":"` + rootURI + `","cid":"` + rootCID + `"},"createdAt":"2026-01-01T00:00:00Z"}`},
		{"like", postURI, `{"subject":` + parent + `}`, `{"$type":"app.bsky.feed.repost","subject":` + parent + `,"createdAt":"2026-01-01T00:00:00Z"}`},
		{"follow", bobDID, `{}`, `{"$type":"app.bsky.graph.follow","subject":"did:plc:someoneelse","createdAt":"2026-01-01T00:00:00Z"}`},
		{"quote", postURI, `{"subject":` + parent + `,"text":"look"}`, `{"$type":"app.bsky.feed.post","text":"look","createdAt":"2026-01-01T00:00:00Z"}`},
		{"reply", postURI, `{"parent":` + parent + `,"root":` + parent + `,"text":"yes"}`, `{"$type":"app.bsky.feed.post","text":"yes","createdAt":"2026-01-01T00:00:00Z"}`},
		{"post", "", `{"text":"yes"}`, `{"$type":"app.bsky.feed.post","text":"yes","reply":{"root":` + parent + `,"parent":` + parent + `},"createdAt":"2026-01-01T00:00:00Z"}`},
	} {
		clk := newClock(t0)
		pds := newPDS(t, clk)
		ad := open(t, pds.URL, clk)
		r := request(t, c.action, c.target, c.request)
		var v struct {
			Type string `json:"$type"`
		}
		require.NoError(t, json.Unmarshal([]byte(c.stored), &v))
		uri := "at://" + did + "/" + v.Type + "/" + bluesky.RecordKey(r.Key)
		pds.put(uri, c.stored)
		obj, err := ad.ReadBack(ctx(t), r, uri)
		require.NoError(t, err)
		require.False(t, identity.SameText(obj.Text, r.Text), "%s: %q", c.action, obj.Text)
		require.Contains(t, obj.Text, "is not the one requested")
	}
}

func TestReadBackFailures(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := open(t, pds.URL, clk)
	r := postRequest(t)
	uri := "at://" + did + "/app.bsky.feed.post/" + bluesky.RecordKey(r.Key)

	_, err := ad.ReadBack(ctx(t), r, uri)
	require.ErrorIs(t, err, platform.ErrNotFound, "400 RecordNotFound")

	pds.on("com.atproto.repo.getRecord", 400, `{"error":"InvalidRequest","message":"Could not find repo"}`)
	_, err = ad.ReadBack(ctx(t), r, uri)
	require.Error(t, err)
	require.False(t, errors.Is(err, platform.ErrNotFound), "only RecordNotFound is not found")

	pds.on("com.atproto.repo.getRecord", 500, `{"error":"InternalServerError","message":"Internal Server Error"}`)
	_, err = ad.ReadBack(ctx(t), r, uri)
	require.ErrorContains(t, err, "status 500")
	require.False(t, errors.Is(err, platform.ErrNotFound))

	pds.on("com.atproto.repo.getRecord", 200, `{"uri":"`+uri+`","value":"not a record"}`)
	_, err = ad.ReadBack(ctx(t), r, uri)
	require.ErrorContains(t, err, "the record's value")

	_, err = ad.ReadBack(ctx(t), r, "https://bsky.app/profile/x/post/y")
	require.ErrorContains(t, err, "not an at:// URI")

	pds.Close()
	_, err = ad.ReadBack(ctx(t), r, uri)
	require.Error(t, err)
	require.False(t, errors.Is(err, platform.ErrNotFound))
}
