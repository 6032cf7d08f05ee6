package bluesky_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

func TestMediaSettingsAreValidated(t *testing.T) {
	t.Setenv(passwordEnv, password)
	ref := "env:" + passwordEnv
	base := `{"pds":"https://pds.example","identifier":"` + did + `",`
	for _, c := range []struct{ media, want string }{
		{`"media_hosts":["https://media.example"]`, "a host name"},
		{`"media_hosts":["media.example:443"]`, "a host name"},
		{`"media_hosts":["media.example/images"]`, "a host name"},
		{`"media_hosts":["Media.example"]`, "lower case"},
		{`"media_hosts":["media.example."]`, "lower case, without a trailing dot"},
		{`"media_hosts":[""]`, "a host name"},
		{`"media_hosts":["*"]`, "a host name"},
		{`"media_hosts":["*.com"]`, "top-level domain"},
		{`"media_hosts":["[::1]"]`, "a host name"},
		{`"media_private_networks":["10.0.0.0/33"]`, "media_private_networks"},
		{`"media_private_networks":["10.0.0.1"]`, "media_private_networks"},
		{`"media_ca_file":"/nonexistent/ca.pem"`, "media_ca_file"},
		{`"media_ca_file":"/etc/hostname"`, "holds no PEM certificate"},
	} {
		_, err := openWith(base+c.media+`}`, ref)
		require.ErrorIs(t, err, bluesky.ErrInvalidSettings, c.media)
		require.ErrorContains(t, err, c.want, c.media)
	}
	_, err := openWith(base+`"media_hosts":["media.example","*.cdn.example","192.0.2.7","2001:db8::7"],"media_private_networks":["127.0.0.1/32","fd00::/8","10.1.2.3/16"]}`, ref)
	require.NoError(t, err)
}

// Prepare refuses, with no network call, an image whose URL the account's media settings do
// not allow: not https, a host not among media_hosts (none by default), an address literal
// that is not public unless media_private_networks holds it. The refusal is unsendable: the
// dispatcher parks the intent before any attempt.
func TestPrepareRefusesImageURLsTheSettingsDoNotAllow(t *testing.T) {
	c := newClock(t0)
	prepare := func(media, imageURL string) error {
		ad := openMedia(t, "http://127.0.0.1:1", c, media)
		_, err := ad.Prepare(imageRequest(t, imageURL, imageBytes, ""))
		return err
	}
	for _, r := range []struct{ media, url, want string }{
		{`"reconcile_delay":"10s"`, "https://media.example/a.png", "media_hosts is empty"},
		{mediaExample, "https://other.example/a.png", `host "other.example" is not among the account's media_hosts (media.example)`},
		{mediaExample, "https://media.example.other.example/a.png", "not among"},
		{`"media_hosts":["*.cdn.example"]`, "https://cdn.example/a.png", "not among"},
		{`"media_hosts":["*.cdn.example"]`, "https://evilcdn.example/a.png", "not among"},
		{`"media_hosts":["169.254.169.254"]`, "https://169.254.169.254/latest/meta-data", "169.254.169.254 is a link-local address"},
		{`"media_hosts":["127.0.0.1"]`, "https://127.0.0.1:8443/a.png", "127.0.0.1 is a loopback address"},
		{`"media_hosts":["::ffff:127.0.0.1"]`, "https://[::ffff:127.0.0.1]/a.png", "127.0.0.1 is a loopback address"},
		{`"media_hosts":["::1"]`, "https://[::1]/a.png", "::1 is a loopback address"},
		{`"media_hosts":["10.1.2.3"],"media_private_networks":["127.0.0.0/8"]`, "https://10.1.2.3/a.png", "10.1.2.3 is a private address"},
		{`"media_hosts":["fd12::1"]`, "https://[fd12::1]/a.png", "a private address"},
		{`"media_hosts":["100.64.0.1"]`, "https://100.64.0.1/a.png", "a special-purpose address (100.64.0.0/10)"},
		{`"media_hosts":["0.0.0.0"]`, "https://0.0.0.0/a.png", "the unspecified address"},
		{`"media_hosts":["::ffff:100.64.0.1"]`, "https://[::ffff:100.64.0.1]/a.png", "100.64.0.1 is a special-purpose address"},
		{`"media_hosts":["64:ff9b::a9fe:a9fe"]`, "https://[64:ff9b::a9fe:a9fe]/a.png", "a special-purpose address (64:ff9b::/96)"},
		{`"media_hosts":["media.example"]`, "http://media.example/a.png", "images are fetched over https only"},
	} {
		err := prepare(r.media, r.url)
		require.ErrorIs(t, err, bluesky.ErrMediaRefused, r.url)
		require.ErrorIs(t, err, platform.ErrUnsendable, r.url)
		require.ErrorContains(t, err, r.want, r.url)
	}
	for _, r := range []struct{ media, url string }{
		{mediaExample, "https://media.example/a.png"},
		{mediaExample, "https://MEDIA.example./a.png?size=large"},
		{mediaExample, "https://media.example:8443/a.png"},
		{`"media_hosts":["*.cdn.example"]`, "https://eu.cdn.example/a.png"},
		{`"media_hosts":["203.0.114.9"]`, "https://203.0.114.9/a.png"},
		{`"media_hosts":["127.0.0.1"],"media_private_networks":["127.0.0.0/8"]`, "https://127.0.0.1:8443/a.png"},
		{`"media_hosts":["10.1.2.3"],"media_private_networks":["10.1.0.0/16"]`, "https://10.1.2.3/a.png"},
	} {
		require.NoError(t, prepare(r.media, r.url), r.url)
	}
}

// stageServer is an https server of the tests on 127.0.0.1 that counts its requests by path.
type stageServer struct {
	*httptest.Server
	hits map[string]*atomic.Int64
}

func newStageServer(t *testing.T, routes map[string]http.HandlerFunc) *stageServer {
	t.Helper()
	s := &stageServer{hits: map[string]*atomic.Int64{}}
	for path := range routes {
		s.hits[path] = &atomic.Int64{}
	}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, ok := routes[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		s.hits[r.URL.Path].Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func redirectTo(target string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, target, http.StatusFound) }
}

// acceptUploads makes pds answer uploadBlob with the blob the request's prepared record names.
func acceptUploads(t *testing.T, pds *fakePDS, ad platform.Adapter, r platform.Request) {
	t.Helper()
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
}

// A host name among media_hosts that resolves to a loopback address is refused when the
// fetch dials it (the address after DNS is what is checked), unless media_private_networks
// holds it: nothing reaches the server, nothing is uploaded, and the refusal is unsendable.
func TestStageRefusesANameThatResolvesToALoopbackAddress(t *testing.T) {
	c := newClock(t0)
	pds := newPDS(t, c)
	srv := newStageServer(t, map[string]http.HandlerFunc{"/a.png": func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(imageBytes) }})
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	imageURL := "https://localhost:" + u.Port() + "/a.png"
	ad := openMedia(t, pds.URL, c, `"media_hosts":["localhost"],"media_ca_file":`+strconv.Quote(caFile(t, srv.Server)))
	r := imageRequest(t, imageURL, imageBytes, "")
	_, err = ad.Prepare(r)
	require.NoError(t, err, "a name: its address is known only when it is dialed")

	err = ad.(platform.Stager).Stage(ctx(t), r)
	require.ErrorIs(t, err, bluesky.ErrMediaRefused)
	require.ErrorIs(t, err, platform.ErrUnsendable)
	require.ErrorContains(t, err, "is a loopback address, and none of the account's media_private_networks holds it")
	require.NotContains(t, err.Error(), `Get "`, "the refusal, not the HTTP client's wrapping of it")
	require.Zero(t, srv.hits["/a.png"].Load(), "nothing was fetched")
	require.Zero(t, pds.count("com.atproto.repo.uploadBlob"), "nothing was uploaded")

	// Allowed: the fetch dials the server (whose certificate names 127.0.0.1, not localhost).
	ad = openMedia(t, pds.URL, c, `"media_hosts":["localhost"],"media_private_networks":["127.0.0.0/8","::1/128"],"media_ca_file":`+strconv.Quote(caFile(t, srv.Server)))
	err = ad.(platform.Stager).Stage(ctx(t), r)
	require.Error(t, err)
	require.NotErrorIs(t, err, bluesky.ErrMediaRefused, "dialed, then the certificate is checked")
	require.ErrorContains(t, err, "certificate")
}

// Every redirect is checked as the image's own URL is: one to an allowed https URL is
// followed; one to another host, to plain http or to an address that is not allowed is
// refused before its target is asked for; more than MaxMediaRedirects are refused.
func TestStageChecksEveryRedirect(t *testing.T) {
	c := newClock(t0)
	pds := newPDS(t, c)
	var plainHits atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { plainHits.Add(1); _, _ = w.Write(imageBytes) }))
	t.Cleanup(plain.Close)
	var srv *stageServer
	srv = newStageServer(t, map[string]http.HandlerFunc{
		"/a.png":       func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(imageBytes) },
		"/moved.png":   redirectTo("/a.png"),
		"/to-other":    redirectTo("https://other.example/a.png"),
		"/to-http":     redirectTo(plain.URL + "/a.png"),
		"/to-metadata": redirectTo("https://169.254.169.254/latest/meta-data/"),
		"/to-localhost": func(w http.ResponseWriter, r *http.Request) {
			redirectTo(strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)+"/a.png")(w, r)
		},
		"/loop": redirectTo("/loop"),
	})
	media := `"media_hosts":["127.0.0.1","169.254.169.254"],"media_private_networks":["127.0.0.1/32"],"media_ca_file":` + strconv.Quote(caFile(t, srv.Server))
	ad := openMedia(t, pds.URL, c, media)
	st := ad.(platform.Stager)

	moved := imageRequest(t, srv.URL+"/moved.png", imageBytes, "")
	acceptUploads(t, pds, ad, moved)
	require.NoError(t, st.Stage(ctx(t), moved), "a redirect to an allowed URL is followed")
	require.EqualValues(t, 1, srv.hits["/a.png"].Load())
	require.Equal(t, 1, pds.count("com.atproto.repo.uploadBlob"))

	err := st.Stage(ctx(t), imageRequest(t, "https://other.example/a.png", imageBytes, ""))
	require.ErrorIs(t, err, bluesky.ErrMediaRefused, "Stage checks the URL too, as Prepare does")
	require.ErrorContains(t, err, `host "other.example" is not among the account's media_hosts`)

	for path, want := range map[string]string{
		"/to-other":     `host "other.example" is not among the account's media_hosts`,
		"/to-http":      "images are fetched over https only",
		"/to-metadata":  "169.254.169.254 is a link-local address",
		"/to-localhost": `host "localhost" is not among the account's media_hosts`,
		"/loop":         "more than 3 redirects",
	} {
		err := st.Stage(ctx(t), imageRequest(t, srv.URL+path, imageBytes, ""))
		require.ErrorIs(t, err, bluesky.ErrMediaRefused, path)
		require.ErrorIs(t, err, platform.ErrUnsendable, path)
		require.ErrorContains(t, err, want, path)
	}
	require.EqualValues(t, 1, srv.hits["/a.png"].Load(), "no refused redirect reached an image")
	require.Zero(t, plainHits.Load(), "the plain http server was never asked")
	require.EqualValues(t, 1+bluesky.MaxMediaRedirects, srv.hits["/loop"].Load())
	require.Equal(t, 1, pds.count("com.atproto.repo.uploadBlob"), "nothing more was uploaded")
}
