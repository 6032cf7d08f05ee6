package bluesky_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

var imageBytes = []byte("\x89PNG\r\n\x1a\n not really an image, but bytes with a digest")

// imageServer serves body at /a.png over https on loopback, and the settings that let an
// adapter fetch from it: the host, the loopback network and the server's certificate.
func imageServer(t *testing.T, body []byte) (string, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	t.Cleanup(srv.Close)
	return srv.URL + "/a.png", loopbackMedia(t, srv)
}

// loopbackMedia are the media settings that allow srv, an https server of the tests on
// 127.0.0.1: its host, the loopback network, its certificate.
func loopbackMedia(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	return `"media_hosts":["127.0.0.1"],"media_private_networks":["127.0.0.1/32"],"media_ca_file":` + strconv.Quote(caFile(t, srv))
}

// caFile writes srv's certificate to a PEM file.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "media-ca.pem")
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600))
	return path
}

// openMedia opens the adapter for acct-1 against pds with the media settings media (JSON
// members, without braces).
func openMedia(t *testing.T, pds string, c *clock, media string) platform.Adapter {
	t.Helper()
	t.Setenv(passwordEnv, password)
	ad, err := bluesky.Open(platform.Account{ID: "acct-1", Platform: bluesky.Name,
		Settings:      json.RawMessage(`{"pds":"` + pds + `","identifier":"` + did + `",` + media + `}`),
		CredentialRef: "env:" + passwordEnv, CredentialVersion: 1})
	require.NoError(t, err)
	bluesky.SetClock(ad, c.now)
	return ad
}

const mediaExample = `"media_hosts":["media.example"]`

func imageRequest(t *testing.T, url string, body []byte, extra string) platform.Request {
	sum := sha256.Sum256(body)
	return request(t, "post", "", fmt.Sprintf(`{"text":"with an image","images":[{"url":%q,"sha256":%q,"mime_type":"image/png","size":%d,"alt":"alt text"%s}]}`,
		url, hex.EncodeToString(sum[:]), len(body), extra))
}

// Prepare renders the images' blob references from the request alone: the CID of the digest,
// the type and the size the request names, and the alt text.
func TestPrepareEmbedsTheImagesTheRequestNames(t *testing.T) {
	ad := openMedia(t, "http://127.0.0.1:1", newClock(time.Unix(1_700_000_000, 0)), mediaExample)
	p, err := ad.Prepare(imageRequest(t, "https://media.example/a.png", imageBytes, ""))
	require.NoError(t, err)
	var body struct {
		Record struct {
			Embed struct {
				Type   string `json:"$type"`
				Images []struct {
					Alt   string `json:"alt"`
					Image struct {
						Type     string            `json:"$type"`
						Ref      map[string]string `json:"ref"`
						MimeType string            `json:"mimeType"`
						Size     int               `json:"size"`
					} `json:"image"`
				} `json:"images"`
			} `json:"embed"`
		} `json:"record"`
	}
	require.NoError(t, json.Unmarshal(p.Body, &body))
	require.Equal(t, "app.bsky.embed.images", body.Record.Embed.Type)
	require.Len(t, body.Record.Embed.Images, 1)
	img := body.Record.Embed.Images[0]
	require.Equal(t, "alt text", img.Alt)
	require.Equal(t, "blob", img.Image.Type)
	require.Equal(t, "image/png", img.Image.MimeType)
	require.Equal(t, len(imageBytes), img.Image.Size)
	require.True(t, strings.HasPrefix(img.Image.Ref["$link"], "bafkrei"), "a CIDv1 of the raw codec and SHA-256: %s", img.Image.Ref["$link"])
}

// Images outside the documented limits are refused by Prepare (unsendable), never fetched.
func TestPrepareRefusesImagesOutsideTheLimits(t *testing.T) {
	ad := openMedia(t, "http://127.0.0.1:1", newClock(time.Unix(1_700_000_000, 0)), mediaExample)
	sum := sha256.Sum256(imageBytes)
	good := fmt.Sprintf(`{"url":"https://media.example/a.png","sha256":%q,"mime_type":"image/png","size":10,"alt":""}`, hex.EncodeToString(sum[:]))
	_, err := ad.Prepare(request(t, "post", "", `{"text":"x","images":[`+good+`]}`))
	require.NoError(t, err, "the image within the limits")
	for name, images := range map[string]string{
		"none":          `[]`,
		"five":          "[" + strings.Repeat(good+",", 4) + good + "]",
		"plain http":    strings.Replace("["+good+"]", "https://media.example", "http://media.example", 1),
		"loopback http": strings.Replace("["+good+"]", "https://media.example", "http://127.0.0.1", 1),
		"other type":    strings.Replace("["+good+"]", "image/png", "image/svg+xml", 1),
		"too large":     strings.Replace("["+good+"]", `"size":10`, `"size":1000001`, 1),
		"empty":         strings.Replace("["+good+"]", `"size":10`, `"size":0`, 1),
		"short digest":  strings.Replace("["+good+"]", hex.EncodeToString(sum[:]), "abcd", 1),
		"unknown field": strings.Replace("["+good+"]", `"alt":""`, `"alt":"","width":3`, 1),
	} {
		_, err := ad.Prepare(request(t, "post", "", `{"text":"x","images":`+images+`}`))
		require.ErrorIs(t, err, platform.ErrUnsendable, name)
	}
	_, err = ad.Prepare(request(t, "like", "at://did:plc:abc/app.bsky.feed.post/3k", `{"subject":{"uri":"at://did:plc:abc/app.bsky.feed.post/3k","cid":"bafyreiabc123"},"images":[`+good+`]}`))
	require.ErrorIs(t, err, platform.ErrUnsendable, "a like takes no images")
}

// Stage uploads the fetched bytes once they match the request's digest; other bytes are
// unsendable and nothing is uploaded; a PDS that stores another blob than the one named is
// unsendable too.
func TestStageUploadsOnlyTheBytesTheRequestNames(t *testing.T) {
	c := newClock(time.Unix(1_700_000_000, 0))
	pds := newPDS(t, c)
	otherURL, media := imageServer(t, []byte("other bytes"))
	goodURL, _ := imageServer(t, imageBytes) // the same certificate: httptest's
	ad := openMedia(t, pds.URL, c, media)
	st := ad.(platform.Stager)

	other := imageRequest(t, otherURL, imageBytes, "")
	require.ErrorIs(t, st.Stage(ctx(t), other), platform.ErrUnsendable)
	require.Zero(t, pds.count("com.atproto.repo.uploadBlob"), "nothing uploaded")

	r := imageRequest(t, goodURL, imageBytes, "")
	p, err := ad.Prepare(r)
	require.NoError(t, err)
	var prepared struct {
		Record struct {
			Embed struct {
				Images []struct {
					Image json.RawMessage `json:"image"`
				} `json:"images"`
			} `json:"embed"`
		} `json:"record"`
	}
	require.NoError(t, json.Unmarshal(p.Body, &prepared))
	blob := prepared.Record.Embed.Images[0].Image
	pds.onFunc("com.atproto.repo.uploadBlob", func(w http.ResponseWriter, _ *http.Request) { reply(w, map[string]any{"blob": blob}) })
	require.NoError(t, st.Stage(ctx(t), r))
	require.Equal(t, 1, pds.count("com.atproto.repo.uploadBlob"))

	pds.on("com.atproto.repo.uploadBlob", http.StatusOK, `{"blob":{"$type":"blob","ref":{"$link":"bafkreiother"},"mimeType":"image/png","size":3}}`)
	require.ErrorIs(t, st.Stage(ctx(t), r), platform.ErrUnsendable)

	pds.on("com.atproto.repo.uploadBlob", http.StatusInternalServerError, `{"error":"InternalServerError"}`)
	err = st.Stage(ctx(t), r)
	require.Error(t, err)
	require.NotErrorIs(t, err, platform.ErrUnsendable, "a failed upload is staged again later")
	require.NotContains(t, err.Error(), password)
}

// A post whose images are not the request's (other blobs, another alt text, none) does not
// read back as the intent's post.
func TestAPostWithOtherImagesDoesNotReadBack(t *testing.T) {
	clk := newClock(t0)
	pds := newPDS(t, clk)
	ad := openMedia(t, pds.URL, clk, mediaExample)
	r := imageRequest(t, "https://media.example/a.png", imageBytes, "")
	p, err := ad.Prepare(r)
	require.NoError(t, err)
	var prepared struct {
		Record json.RawMessage `json:"record"`
	}
	require.NoError(t, json.Unmarshal(p.Body, &prepared))
	uri := "at://" + did + "/app.bsky.feed.post/" + bluesky.RecordKey(r.Key)

	pds.put(uri, string(prepared.Record))
	obj, err := ad.ReadBack(ctx(t), r, uri)
	require.NoError(t, err)
	require.True(t, identity.SameText(obj.Text, r.Text), "the post as prepared reads back: %q", obj.Text)

	for name, stored := range map[string]string{
		"another blob": strings.Replace(string(prepared.Record), `"$link":"bafkrei`, `"$link":"bafkreX`, 1),
		"another alt":  strings.Replace(string(prepared.Record), `"alt":"alt text"`, `"alt":"other"`, 1),
		"no images":    `{"$type":"app.bsky.feed.post","text":"with an image","createdAt":"2026-01-01T00:00:00Z"}`,
	} {
		pds.put(uri, stored)
		obj, err := ad.ReadBack(ctx(t), r, uri)
		require.NoError(t, err)
		require.False(t, identity.SameText(obj.Text, r.Text), "%s: %q", name, obj.Text)
	}
}
