package identity

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// CanonicalSourceID returns the canonical form of a source's stable id, the
// form that SourceVersion hashes and that the envelope's source.id is stored
// in. The id is trimmed (Unicode white space) and converted to NFC. If the
// result parses (net/url) as an absolute http or https URL with a host, it is
// further canonicalized:
//
//   - ASCII letters of the scheme and of the host are lower-cased (non-ASCII
//     host names are left as given: no IDNA processing);
//   - a default port (":80" for http, ":443" for https) and an empty port
//     (a trailing ":") are removed;
//   - the fragment ("#..." ) is removed;
//   - an empty path becomes "/".
//
// Userinfo, path, query and percent-encoding are kept byte for byte. Any other
// id (an object id, a URN, a URL of another scheme) is kept as trimmed NFC.
//
// Errors: ErrEmptySourceID if nothing is left after trimming, ErrInvalidUTF8
// if id is not valid UTF-8. The function is idempotent.
func CanonicalSourceID(id string) (string, error) {
	if !utf8.ValidString(id) {
		return "", ErrInvalidUTF8
	}
	id = strings.TrimFunc(norm.NFC.String(id), unicode.IsSpace)
	if id == "" {
		return "", ErrEmptySourceID
	}
	return canonicalHTTPURL(id), nil
}

// canonicalHTTPURL rewrites s in place rather than through url.URL.String,
// which re-escapes paths and user info and would make the canonical form
// depend on net/url's escaping choices.
func canonicalHTTPURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Opaque != "" || u.Host == "" {
		return s
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return s
	}
	// url.Parse accepted "scheme://authority...", so the authority starts
	// right after the first "://".
	if !strings.HasPrefix(s[len(u.Scheme):], "://") {
		return s
	}
	rest := s[len(u.Scheme)+len("://"):]
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	authEnd := strings.IndexAny(rest, "/?")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	authority, tail := rest[:authEnd], rest[authEnd:]
	userinfo, hostport := "", authority
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		userinfo, hostport = authority[:i+1], authority[i+1:]
	}
	hostport = lowerASCII(hostport)
	if port := u.Port(); port == "" || scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		hostport = strings.TrimSuffix(hostport, ":"+port)
	}
	if tail == "" || tail[0] == '?' {
		tail = "/" + tail
	}
	return scheme + "://" + userinfo + hostport + tail
}

func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}
