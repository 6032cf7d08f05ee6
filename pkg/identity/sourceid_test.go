package identity

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCanonicalSourceIDCanonicalizesOnlyHTTPURLs(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"plain URL unchanged", "https://example.org/a?b=1", "https://example.org/a?b=1"},
		{"scheme and host lower-cased", "HTTPS://Example.ORG/Path", "https://example.org/Path"},
		{"default http port removed", "http://example.org:80/a", "http://example.org/a"},
		{"default https port removed", "https://example.org:443/a", "https://example.org/a"},
		{"other port kept", "https://example.org:8443/a", "https://example.org:8443/a"},
		{"http port on https kept", "https://example.org:80/a", "https://example.org:80/a"},
		{"empty port removed", "http://example.org:/a", "http://example.org/a"},
		{"fragment removed", "https://example.org/a#section", "https://example.org/a"},
		{"empty path becomes slash", "https://example.org", "https://example.org/"},
		{"empty path with query", "https://example.org?q=1#f", "https://example.org/?q=1"},
		{"IPv6 default port removed", "http://[::1]:80", "http://[::1]/"},
		{"userinfo kept as is", "http://User@Example.org/", "http://User@example.org/"},
		{"percent-encoding kept", "https://example.org/a%2Fb%7e", "https://example.org/a%2Fb%7e"},
		{"surrounding white space trimmed", " \thttps://example.org/x\n", "https://example.org/x"},
		{"NFC applied", "urn:x:cafe\u0301", "urn:x:caf\u00e9"},
		{"object id kept", "at://did:plc:abc/app.bsky.feed.post/3k", "at://did:plc:abc/app.bsky.feed.post/3k"},
		{"other scheme kept", "FTP://Example.org", "FTP://Example.org"},
		{"relative reference kept", "/a/b#c", "/a/b#c"},
		{"unparseable URL kept", "http://exa mple.org/", "http://exa mple.org/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := CanonicalSourceID(c.in)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
			again, err := CanonicalSourceID(got)
			require.NoError(t, err)
			require.Equal(t, got, again)
		})
	}
}

func TestCanonicalSourceIDRejectsEmptyAndInvalid(t *testing.T) {
	_, err := CanonicalSourceID(" \n\u3000")
	require.ErrorIs(t, err, ErrEmptySourceID)
	_, err = CanonicalSourceID("a\xffb")
	require.ErrorIs(t, err, ErrInvalidUTF8)
}

func TestCanonicalSourceIDIsIdempotent(t *testing.T) {
	parts := []string{"http", "HTTPS", "://", ":", "/", "?", "#", "@", "[", "]", "::1", "80", "443", "Ex", "a",
		"%41", " ", "\u0301", "e", ".", "~", "\t", "::", "x:y"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		s := ""
		for range r.IntN(8) {
			s += parts[r.IntN(len(parts))]
		}
		got, err := CanonicalSourceID(s)
		if err != nil {
			continue
		}
		again, err := CanonicalSourceID(got)
		require.NoError(t, err)
		require.Equal(t, got, again, "input %q", s)
	}
}

func TestSourceVersionIgnoresWhiteSpaceChurnAndFetchDetails(t *testing.T) {
	v1, raw1, err := NewSourceVersion("https://example.org/a", "Title\n\nSome  text.\n")
	require.NoError(t, err)
	v2, raw2, err := NewSourceVersion("HTTPS://EXAMPLE.ORG:443/a#top", "  Title \r\n\r\n\r\n Some text.")
	require.NoError(t, err)
	require.Equal(t, v1, v2)
	require.NotEqual(t, raw1, raw2, "the raw hash records the exact bytes")
	require.Equal(t, sha256.Sum256([]byte("Title\n\nSome  text.\n")), [32]byte(raw1.Bytes()))
}

func TestSourceVersionChangesWithVisibleContentOrSource(t *testing.T) {
	base, _, err := NewSourceVersion("https://example.org/a", "Some text.")
	require.NoError(t, err)
	for _, c := range []struct{ id, body string }{
		{"https://example.org/a", "Some text!"},
		{"https://example.org/a", "Some text"},
		{"https://example.org/a", "Sometext."},
		{"https://example.org/b", "Some text."},
		{"https://example.org/a?x", "Some text."},
		{"http://example.org/a", "Some text."},
	} {
		v, _, err := NewSourceVersion(c.id, c.body)
		require.NoError(t, err)
		require.NotEqual(t, base, v, "%q %q", c.id, c.body)
	}
}

func TestSourceVersionFieldsAreUnambiguous(t *testing.T) {
	a, _, err := NewSourceVersion("urn:ab", "c")
	require.NoError(t, err)
	b, _, err := NewSourceVersion("urn:a", "bc")
	require.NoError(t, err)
	require.NotEqual(t, a, b)
}

func TestNewSourceVersionRejectsAnEmptyID(t *testing.T) {
	_, _, err := NewSourceVersion("  ", "body")
	require.ErrorIs(t, err, ErrEmptySourceID)
}
