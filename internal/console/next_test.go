package console

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
)

// The login's next is a path of this console, or "/": resolved as a browser resolves a
// Location, it never leaves the console's origin, whatever was asked.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/", "/intents?state=parked", "//evil.example", "/\\evil.example/phish.html", "/%09/evil",
		"/\t/evil", "https://evil.example/", "/%2F/evil", "/%5Cevil", "javascript:alert(1)", "/ok/../x", "\\\\evil", "/%E0%A4%A"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://console.example:9105/login")
	f.Fuzz(func(t *testing.T, next string) {
		got := safeNext(next)
		if got != "/" && got != next {
			t.Fatalf("safeNext(%q) = %q: neither the path asked nor /", next, got)
		}
		if strings.ContainsRune(got, '\\') || strings.Contains(got, "//") || strings.IndexFunc(got, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			t.Fatalf("safeNext(%q) = %q: a browser may read it as another host", next, got)
		}
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("safeNext(%q) = %q does not parse: %v", next, got, err)
		}
		if to := base.ResolveReference(u); to.Host != base.Host || to.Scheme != base.Scheme {
			t.Fatalf("safeNext(%q) = %q leads to %s", next, got, to)
		}
		if dec, err := url.PathUnescape(got); err != nil || strings.Contains(dec, "//") || strings.ContainsRune(dec, '\\') {
			t.Fatalf("safeNext(%q) = %q decodes to another host's path %q", next, got, dec)
		}
	})
}

// The redirects the review found, and the paths the console's own redirects make.
func TestSafeNextKeepsOnlyThisConsolesPaths(t *testing.T) {
	t.Parallel()
	for next, want := range map[string]string{
		"/":                                 "/",
		"/intents?state=parked&account=a-b": "/intents?state=parked&account=a-b",
		"/intents/x%3Ay":                    "/intents/x%3Ay",
		"/\\host/phish.html":                "/",
		"/%09/evil":                         "/",
		"/%5C%5Cevil":                       "/",
		"//evil.example/":                   "/",
		"/%2F%2Fevil.example/":              "/",
		"https://evil.example/":             "/",
		"evil":                              "/",
		"/ /evil":                           "/",
		"":                                  "/",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}
