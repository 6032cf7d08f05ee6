package console

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/atmost/atmost/pkg/ledger"
)

// checkRequest refuses, before any handler or authentication, a request the console will not
// read: a body that is not a URL-encoded form (a multipart body would be spooled to disk) or,
// on the API, a JSON object of strings (readJSONForm), one over MaxBody, and a form or query value that is not valid UTF-8, holds a NUL or another
// control character, or is longer than a note may be (ledger.MaxNote). It returns the status
// and the problem, or "" for a request to serve.
func checkRequest(r *http.Request) (int, string) {
	if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		if ct := r.Header.Get("Content-Type"); ct != "" && !jsonBody(r) {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || mt != "application/x-www-form-urlencoded" {
				return http.StatusUnsupportedMediaType, "the console takes URL-encoded forms only (and its API JSON objects)"
			}
		}
		if jsonBody(r) {
			if err := readJSONForm(r); err != nil {
				var tooBig *http.MaxBytesError
				if errors.As(err, &tooBig) {
					return http.StatusRequestEntityTooLarge, fmt.Sprintf("a request's body holds at most %d bytes", MaxBody)
				}
				return http.StatusBadRequest, err.Error()
			}
		}
	}
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return http.StatusRequestEntityTooLarge, fmt.Sprintf("a request's body holds at most %d bytes", MaxBody)
		}
		return http.StatusBadRequest, "the form or the query could not be read"
	}
	for name, vs := range r.Form {
		for _, v := range append([]string{name}, vs...) {
			if !utf8.ValidString(v) {
				return http.StatusBadRequest, fmt.Sprintf("the field %q is not valid UTF-8", clip(name))
			}
			if strings.IndexFunc(v, func(c rune) bool { return unicode.IsControl(c) && c != '\n' && c != '\r' && c != '\t' }) >= 0 {
				return http.StatusBadRequest, fmt.Sprintf("the field %q holds a NUL or another control character", clip(name))
			}
			if utf8.RuneCountInString(v) > ledger.MaxNote {
				return http.StatusUnprocessableEntity, fmt.Sprintf("the field %q holds more than %d characters", clip(name), ledger.MaxNote)
			}
		}
	}
	return 0, ""
}

// clip shortens a field's name for a message: a hostile one may be long.
func clip(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

// safeNext is where the login sends a person after it: next when it is a path of this console,
// else "/". A browser reads "/\host" and "/<tab>/host" as another host ("//host"), so next must
// start with a single '/', and neither it nor its decoded form may hold "//", a backslash,
// whitespace or a control character; it must not parse as having a scheme or a host.
func safeNext(next string) string {
	decoded, err := url.PathUnescape(next)
	if err != nil {
		return "/"
	}
	for _, p := range []string{next, decoded} {
		if !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.ContainsRune(p, '\\') ||
			strings.IndexFunc(p, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) || c == utf8.RuneError }) >= 0 {
			return "/"
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	return next
}

// clientOf names the client of a request by its address, for throttling and for the logs. A
// header that names another (X-Forwarded-For) is not believed: anyone can send one.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// MinTokenLength is the fewest characters a console token may hold.
const MinTokenLength = 32

// CheckToken refuses a token that can be guessed: shorter than MinTokenLength, with
// whitespace, or of fewer than 10 distinct characters ("aaaa…", "abab…").
func CheckToken(token string) error {
	distinct := map[rune]bool{}
	for _, c := range token {
		distinct[c] = true
	}
	if utf8.RuneCountInString(token) < MinTokenLength || strings.IndexFunc(token, unicode.IsSpace) >= 0 || len(distinct) < 10 {
		return fmt.Errorf("the console's token is too weak: give at least %d random characters without spaces, for example the output of `openssl rand -base64 32`", MinTokenLength)
	}
	return nil
}

// NewToken is a bootstrap token for a console that lives one run (atmost dev, atmost demo):
// 32 bytes from crypto/rand, which CheckToken takes.
func NewToken() string { return randomID() }
