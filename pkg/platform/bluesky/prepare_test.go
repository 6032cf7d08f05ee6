package bluesky_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

const createdAt = `"createdAt":"2026-03-01T12:30:45.123Z"`

// Every action renders the record of its lexicon, exactly, under the derived record key.
func TestPrepareRendersTheLexiconRecords(t *testing.T) {
	ad := open(t, "https://pds.example", newClock(t0))
	rkey := bluesky.RecordKey(keyN(t, 1))
	parent := `{"uri":"` + postURI + `","cid":"` + postCID + `"}`
	root := `{"uri":"` + rootURI + `","cid":"` + rootCID + `"}`
	for _, c := range []struct {
		name                    string
		action, target, request string
		collection, record      string
	}{
		{"post", "post", "", `{"text":"` + postText + `"}`, "app.bsky.feed.post",
			`{"$type":"app.bsky.feed.post","text":"` + postText + `",` + createdAt + `}`},
		{"post with langs", "post", "", `{"langs":["en","pt-BR"],"text":"olá"}`, "app.bsky.feed.post",
			`{"$type":"app.bsky.feed.post","text":"olá","langs":["en","pt-BR"],` + createdAt + `}`},
		{"reply", "reply", postURI, `{"parent":` + parent + `,"root":` + root + `,"text":"yes"}`, "app.bsky.feed.post",
			`{"$type":"app.bsky.feed.post","text":"yes","reply":{"root":` + root + `,"parent":` + parent + `},` + createdAt + `}`},
		{"quote", "quote", postURI, `{"subject":` + parent + `,"text":"look"}`, "app.bsky.feed.post",
			`{"$type":"app.bsky.feed.post","text":"look","embed":{"$type":"app.bsky.embed.record","record":` + parent + `},` + createdAt + `}`},
		{"like", "like", postURI, `{"subject":` + parent + `}`, "app.bsky.feed.like",
			`{"$type":"app.bsky.feed.like","subject":` + parent + `,` + createdAt + `}`},
		{"repost", "repost", postURI, `{"subject":` + parent + `}`, "app.bsky.feed.repost",
			`{"$type":"app.bsky.feed.repost","subject":` + parent + `,` + createdAt + `}`},
		{"follow", "follow", bobDID, `{}`, "app.bsky.graph.follow",
			`{"$type":"app.bsky.graph.follow","subject":"` + bobDID + `",` + createdAt + `}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := request(t, c.action, c.target, c.request)
			p, err := ad.Prepare(r)
			require.NoError(t, err)
			require.Equal(t, "POST", p.Method)
			require.Equal(t, "https://pds.example/xrpc/com.atproto.repo.createRecord", p.URL)
			require.Equal(t, map[string][]string{"Content-Type": {"application/json"}, "Accept": {"application/json"}}, p.Header,
				"no Authorization: the credential is added at send time")
			require.Equal(t, `{"repo":"`+did+`","collection":"`+c.collection+`","rkey":"`+rkey+`","record":`+c.record+`}`, string(p.Body))
			require.Equal(t, platform.NewPrepared(r, p.Method, p.URL, p.Header, p.Body).Hash, p.Hash)
			require.Equal(t, r, p.Request)
		})
	}
}

// createdAt is the time of Prepare: the same request prepared at the same instant gives the
// same bytes, at another instant another createdAt (and hash), and never another record key.
func TestCreatedAtIsTheTimeOfPrepare(t *testing.T) {
	c := newClock(t0)
	ad := open(t, "https://pds.example", c)
	p1, err := ad.Prepare(postRequest(t))
	require.NoError(t, err)
	p2, err := ad.Prepare(postRequest(t))
	require.NoError(t, err)
	require.Equal(t, p1.Hash, p2.Hash)

	c.add(1500 * time.Millisecond)
	p3, err := ad.Prepare(postRequest(t))
	require.NoError(t, err)
	require.Contains(t, string(p3.Body), `"createdAt":"2026-03-01T12:30:46.623Z"`)
	require.NotEqual(t, p1.Hash, p3.Hash)
	require.Contains(t, string(p3.Body), `"rkey":"`+bluesky.RecordKey(keyN(t, 1))+`"`)

	// A clock in another zone still writes UTC.
	c.set(time.Date(2026, 3, 1, 9, 0, 0, 0, time.FixedZone("BRT", -3*3600)))
	p4, err := ad.Prepare(postRequest(t))
	require.NoError(t, err)
	require.Contains(t, string(p4.Body), `"createdAt":"2026-03-01T12:00:00.000Z"`)
}

// The credential is in nothing Prepare makes, and accounts that differ only in their password
// prepare the same bytes and hash.
func TestTheHashDoesNotDependOnTheCredential(t *testing.T) {
	c := newClock(t0)
	a := open(t, "https://pds.example", c)
	t.Setenv("ATMOST_BLUESKY_OTHER", "another-password")
	b, err := bluesky.Open(platform.Account{ID: "acct-1", Platform: bluesky.Name, Settings: []byte(settings("https://pds.example")),
		CredentialRef: "env:ATMOST_BLUESKY_OTHER", CredentialVersion: 2})
	require.NoError(t, err)
	bluesky.SetClock(b, c.now)
	pa, err := a.Prepare(postRequest(t))
	require.NoError(t, err)
	pb, err := b.Prepare(postRequest(t))
	require.NoError(t, err)
	require.Equal(t, pa.Hash, pb.Hash)
	require.Equal(t, pa.Body, pb.Body)
	require.NotContains(t, string(pa.Body), password)
	for name, values := range pa.Header {
		require.NotEqual(t, "Authorization", name)
		for _, v := range values {
			require.NotContains(t, v, password)
		}
	}
}

func TestPrepareRefusesWhatItCannotRender(t *testing.T) {
	ad := open(t, "https://pds.example", newClock(t0))
	parent := `{"uri":"` + postURI + `","cid":"` + postCID + `"}`
	root := `{"uri":"` + rootURI + `","cid":"` + rootCID + `"}`
	for _, c := range []struct {
		action, target, request, want string
	}{
		{"delete", "", `{}`, `action "delete": want one of post, reply, quote, like, repost, follow`},
		{"block", bobDID, `{}`, `action "block"`},
		{"post", "", `{}`, `the request field "text" is required`},
		{"post", "", `{"text":"x","embed":{}}`, `unknown field "embed"`},
		{"post", "", `{"text":"x","subject":` + parent + `}`, `"subject" does not belong to this action`},
		{"post", "", `{"text":1}`, "cannot unmarshal number"},
		{"post", "x", `{"text":"x"}`, "the target must be empty"},
		{"post", "", `{"text":"x","langs":["en","fr","de","es"]}`, "at most 3 languages"},
		{"post", "", `{"text":"x","langs":["english language"]}`, "not a language tag"},
		{"reply", postURI, `{"text":"x","parent":` + parent + `}`, `"root" is required`},
		{"reply", postURI, `{"text":"x","root":` + root + `}`, `"parent" is required`},
		{"reply", rootURI, `{"text":"x","parent":` + parent + `,"root":` + root + `}`, "differs from parent.uri"},
		{"reply", postURI, `{"parent":` + parent + `,"root":` + root + `}`, `"text" is required`},
		{"quote", postURI, `{"text":"x"}`, `"subject" is required`},
		{"quote", rootURI, `{"text":"x","subject":` + parent + `}`, "differs from subject.uri"},
		{"like", postURI, `{}`, `"subject" is required`},
		{"like", postURI, `{"subject":{"uri":"` + postURI + `"}}`, `cid "" is not a CID`},
		{"like", postURI, `{"subject":{"uri":"` + postURI + `","cid":"` + postCID + `","x":1}}`, `unknown field "x"`},
		{"like", "https://bsky.app/x", `{"subject":{"uri":"https://bsky.app/x","cid":"` + postCID + `"}}`, "is not an at:// URI"},
		{"like", "at://" + bobDID, `{"subject":{"uri":"at://` + bobDID + `","cid":"` + postCID + `"}}`, "does not name a record"},
		{"like", "at://bob/app.bsky.feed.post/x", `{"subject":{"uri":"at://bob/app.bsky.feed.post/x","cid":"` + postCID + `"}}`, "neither a DID nor a handle"},
		{"like", "at://" + bobDID + "/post/x", `{"subject":{"uri":"at://` + bobDID + `/post/x","cid":"` + postCID + `"}}`, "not an NSID"},
		{"like", "at://" + bobDID + "/app.bsky.feed.post/..", `{"subject":{"uri":"at://` + bobDID + `/app.bsky.feed.post/..","cid":"` + postCID + `"}}`, "record key is not valid"},
		{"like", "", `{"subject":` + parent + `}`, "differs from subject.uri"},
		{"repost", postURI, `{"subject":` + parent + `,"text":"x"}`, `"text" does not belong`},
		{"follow", "bob.test", `{}`, "is not a DID"},
		{"follow", bobDID, `{"subject":"` + bobDID + `"}`, "cannot unmarshal string"},
	} {
		_, err := ad.Prepare(request(t, c.action, c.target, c.request))
		require.ErrorIs(t, err, bluesky.ErrInvalidRequest, "%s %s", c.action, c.request)
		require.ErrorContains(t, err, c.want, "%s %s", c.action, c.request)
	}

	r := postRequest(t)
	r.Key = identity.DeliveryKey{}
	_, err := ad.Prepare(r)
	require.ErrorContains(t, err, "no delivery key")

	r = postRequest(t)
	r.Account = "acct-2"
	_, err = ad.Prepare(r)
	require.ErrorIs(t, err, bluesky.ErrWrongAccount)
}
