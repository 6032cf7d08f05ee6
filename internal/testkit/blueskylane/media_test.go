package blueskylane_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"image"
	"image/color"
	"image/png"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/blueskylane"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// images serves PNG images over https on loopback, as a producer's media store would; while
// failing is set it answers 503 instead.
type images struct {
	srv     *httptest.Server
	failing atomic.Bool
	fetches atomic.Int64
	files   map[string][]byte
}

func newImages(t *testing.T, n int) *images {
	t.Helper()
	im := &images{files: map[string][]byte{}}
	for i := range n {
		img := image.NewRGBA(image.Rect(0, 0, 8+i, 8))
		for x := range 8 + i {
			img.Set(x, x%8, color.RGBA{R: uint8(40 * i), G: 200, B: 10, A: 255})
		}
		var b bytes.Buffer
		require.NoError(t, png.Encode(&b, img))
		im.files["/img"+string(rune('0'+i))+".png"] = b.Bytes()
	}
	im.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		im.fetches.Add(1)
		body, ok := im.files[r.URL.Path]
		switch {
		case im.failing.Load():
			w.WriteHeader(http.StatusServiceUnavailable)
		case !ok:
			w.WriteHeader(http.StatusNotFound)
		default:
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(body)
		}
	}))
	t.Cleanup(im.srv.Close)
	return im
}

// settings are the account's media settings that allow the server: its host, on loopback
// only because media_private_networks names it, and its certificate.
func (im *images) settings(t *testing.T) map[string]any {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "media-ca.pem")
	require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: im.srv.Certificate().Raw}), 0o600))
	return map[string]any{"media_hosts": []string{"127.0.0.1"}, "media_private_networks": []string{"127.0.0.1/32"}, "media_ca_file": ca}
}

// refs are the request's images field for the served files, in name order.
func (im *images) refs(n int) []map[string]any {
	var out []map[string]any
	for i := range n {
		path := "/img" + string(rune('0'+i)) + ".png"
		body := im.files[path]
		sum := sha256.Sum256(body)
		out = append(out, map[string]any{"url": im.srv.URL + path, "sha256": hex.EncodeToString(sum[:]),
			"mime_type": "image/png", "size": len(body), "alt": "image " + string(rune('0'+i))})
	}
	return out
}

// A post with two images: the dispatcher uploads them (uploadBlob) before the attempt, then
// makes the one createRecord, which references the blobs; the read-back compares the images.
// A second post with images whose createRecord answer is lost after the PDS created it goes
// indeterminate and is published by its one lookup: the PDS holds exactly one post for it,
// with its images, and saw one createRecord.
func TestPostsWithImagesArePublishedOnceAndALostAnswerMakesNoSecond(t *testing.T) {
	t.Parallel()
	im := newImages(t, 2)
	e := newLaneWith(t, im.settings(t))
	e.dispatcher()
	e.reconciler()

	first := e.submit(envelope("post", "", map[string]any{"text": "two images", "images": im.refs(2)}))[0]
	in := e.await([]identity.DeliveryKey{first}, time.Minute, ledger.Published)[first]
	require.Equal(t, ledger.ReasonPublished, in.Reason, "published and read back, images compared")
	stored, ok := e.getRecord(posts, first)
	require.True(t, ok)
	embed, _ := stored.Value["embed"].(map[string]any)
	require.Equal(t, "app.bsky.embed.images", embed["$type"])
	require.Len(t, embed["images"], 2)
	require.EqualValues(t, 1, e.proxy.Forwarded(), "one createRecord")

	e.proxy.DropNext(blueskylane.DropAfterRequest)
	lost := e.submit(envelope("post", "", map[string]any{"text": "an image, the answer lost", "images": im.refs(1)}))[0]
	in = e.await([]identity.DeliveryKey{lost}, time.Minute, ledger.Published)[lost]
	require.Equal(t, ledger.ReasonReconciledFound, in.Reason, "published by the lookup")
	rec, err := e.Ledger.Inspect(e.Ctx, lost)
	require.NoError(t, err)
	require.Len(t, rec.Attempts, 1, "one attempt: the unknown outcome was never retried")
	stored, ok = e.getRecord(posts, lost)
	require.True(t, ok)
	require.Equal(t, "an image, the answer lost", stored.Value["text"])

	require.Len(t, e.allRecords(posts), 2, "one post per intent on the PDS")
	require.EqualValues(t, 2, e.proxy.Forwarded(), "no second createRecord")
	require.EqualValues(t, 1, e.proxy.Dropped())
}

// An image that cannot be fetched: the upload fails before any attempt is begun, so nothing is
// sent (no createRecord reaches the PDS, no attempt in the ledger) and the intent stays
// pending; once the image can be fetched again, it is staged again and published once.
func TestAnImageUploadFailureSendsNothing(t *testing.T) {
	t.Parallel()
	im := newImages(t, 1)
	e := newLaneWith(t, im.settings(t))
	im.failing.Store(true)
	e.dispatcher()

	key := e.submit(envelope("post", "", map[string]any{"text": "an image that cannot be fetched yet", "images": im.refs(1)}))[0]
	require.Eventually(t, func() bool { return im.fetches.Load() >= 3 }, time.Minute, 50*time.Millisecond, "the dispatcher staged it again and again")
	rec, err := e.Ledger.Inspect(e.Ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledger.Pending, rec.Intent.State, "nothing happened to the intent")
	require.Empty(t, rec.Attempts, "no attempt was begun")
	require.EqualValues(t, 0, e.proxy.Forwarded(), "no createRecord reached the PDS")
	require.Empty(t, e.allRecords(posts))

	im.failing.Store(false)
	in := e.await([]identity.DeliveryKey{key}, time.Minute, ledger.Published)[key]
	require.Equal(t, ledger.ReasonPublished, in.Reason)
	require.Len(t, e.allRecords(posts), 1)
	require.EqualValues(t, 1, e.proxy.Forwarded(), "one createRecord, after the upload succeeded")
}

// An upload whose answer is lost after the PDS stored the blob (the proxy drops the
// connection once the PDS answers) is a failed staging: no attempt is begun and no createRecord
// reaches the PDS, however often it happens; the intent stays pending, and once an upload's
// answer arrives the post is created once, referencing the blob uploaded again.
func TestALostUploadAnswerSendsNothing(t *testing.T) {
	t.Parallel()
	im := newImages(t, 1)
	e := newLaneWith(t, im.settings(t))
	e.proxy.DropUploads(true)
	e.dispatcher()

	key := e.submit(envelope("post", "", map[string]any{"text": "an image whose upload answer is lost", "images": im.refs(1)}))[0]
	require.Eventually(t, func() bool { return e.proxy.Dropped() >= 3 }, time.Minute, 50*time.Millisecond, "the dispatcher staged it again and again")
	rec, err := e.Ledger.Inspect(e.Ctx, key)
	require.NoError(t, err)
	require.Equal(t, ledger.Pending, rec.Intent.State, "nothing happened to the intent")
	require.Empty(t, rec.Attempts, "no attempt was begun")
	require.EqualValues(t, 0, e.proxy.Forwarded(), "no createRecord reached the PDS")
	require.Empty(t, e.allRecords(posts))

	e.proxy.DropUploads(false)
	in := e.await([]identity.DeliveryKey{key}, time.Minute, ledger.Published)[key]
	require.Equal(t, ledger.ReasonPublished, in.Reason)
	require.Len(t, e.allRecords(posts), 1)
	require.EqualValues(t, 1, e.proxy.Forwarded(), "one createRecord, after an upload was answered")
	require.Greater(t, e.proxy.Uploads(), e.proxy.Dropped(), "the PDS answered the last upload")
	t.Logf("%d uploads reached the PDS, %d answers lost, then 1 createRecord", e.proxy.Uploads(), e.proxy.Dropped())
}

// Images the account's media settings do not allow are never fetched: an intent naming one
// (a host not among media_hosts, a cloud's metadata address, the image server's own loopback
// address when media_private_networks does not name it) is parked request_unsendable with the
// refusal as its reason's detail, before any attempt: the image server saw no request, the PDS
// no createRecord.
func TestAnImageFromARefusedPlaceIsParkedAndNothingIsSent(t *testing.T) {
	t.Parallel()
	im := newImages(t, 1)
	settings := im.settings(t)
	settings["media_hosts"] = []string{"127.0.0.1", "localhost", "169.254.169.254"}
	settings["media_private_networks"] = []string{"10.0.0.0/8"}
	e := newLaneWith(t, settings)
	e.dispatcher()

	ref := im.refs(1)[0]
	with := func(u string) map[string]any {
		r := maps.Clone(ref)
		r["url"] = u
		return r
	}
	port := im.srv.URL[strings.LastIndex(im.srv.URL, ":")+1:]
	cases := map[string]string{
		"https://other.example/img0.png":                              `host "other.example" is not among the account's media_hosts`,
		"https://169.254.169.254/latest/meta-data/":                   "169.254.169.254 is a link-local address",
		im.srv.URL + "/img0.png":                                      "127.0.0.1 is a loopback address",
		"https://localhost:" + port + "/img0.png":                     "is a loopback address",
		strings.Replace(im.srv.URL, "https", "http", 1) + "/img0.png": "images are fetched over https only",
	}
	var keys []identity.DeliveryKey
	want := map[identity.DeliveryKey]string{}
	for u, why := range cases {
		k := e.submit(envelope("post", "", map[string]any{"text": "an image from " + u, "images": []any{with(u)}}))[0]
		keys = append(keys, k)
		want[k] = why
	}
	got := e.await(keys, time.Minute, ledger.Parked)
	for _, k := range keys {
		require.Equal(t, ledger.ReasonRequestUnsendable, got[k].Reason, want[k])
		rec, err := e.Ledger.Inspect(e.Ctx, k)
		require.NoError(t, err)
		require.Empty(t, rec.Attempts, "no attempt was begun: %s", want[k])
		var detail struct {
			Why string `json:"why"`
		}
		require.NoError(t, json.Unmarshal(e.lastTransition(k).Detail, &detail))
		require.Contains(t, detail.Why, want[k])
		t.Logf("parked: %s", detail.Why)
	}
	require.Zero(t, im.fetches.Load(), "the image server was never asked")
	require.EqualValues(t, 0, e.proxy.Forwarded(), "no createRecord reached the PDS")
	require.Empty(t, e.allRecords(posts))
}
