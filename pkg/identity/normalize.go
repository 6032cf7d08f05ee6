package identity

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// NormalizeText is the one text normalization of atmost. It is applied before
// hashing (DeliveryKey via the request's "text", TextHash, ClaimID) and again
// when a published object is read back, so "the same text" means the same
// thing on both sides. In order, it:
//
//  1. replaces each maximal run of invalid UTF-8 bytes with U+FFFD, so the
//     result is always valid UTF-8 (the envelope rejects invalid UTF-8
//     before this point; the replacement only keeps other callers total);
//  2. converts to Unicode Normalization Form C (NFC);
//  3. turns every CRLF pair, then every remaining lone CR, into LF;
//  4. trims leading and trailing white space, as defined by Unicode's
//     White_Space property (unicode.IsSpace: includes LF, tab, NBSP, U+2028).
//
// Interior white space is kept exactly, because it is visible in a post:
// "a  b" and "a b" are different texts. Case, punctuation, NEL (U+0085) and
// U+2028/U+2029 in the interior are not touched. The function is idempotent.
func NormalizeText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = norm.NFC.String(s)
	if strings.IndexByte(s, '\r') >= 0 {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		s = strings.ReplaceAll(s, "\r", "\n")
	}
	return strings.TrimFunc(s, unicode.IsSpace)
}

// SameText reports whether a and b are the same text after NormalizeText. It
// is the read-back comparison: a platform that returns the text in NFD or
// with CRLF line ends still matches, one that changed a visible character
// does not.
func SameText(a, b string) bool {
	return NormalizeText(a) == NormalizeText(b)
}

// NormalizeBody normalizes a source's visible body for SourceVersion, so that
// churn in white space (re-indented markup, trailing spaces, extra blank
// lines) does not mint a new version while any visible word change does. It
// applies NormalizeText and then, treating LF as the only line separator:
//
//  1. trims white space from the start and end of every line;
//  2. collapses each run of white space inside a line to one space U+0020
//     (tabs, NBSP, U+2028 and every other White_Space character included);
//  3. collapses each run of blank lines to a single blank line.
//
// The caller extracts the visible text (no markup, scripts or tokens);
// NormalizeBody only removes the white space differences. It is idempotent.
func NormalizeBody(s string) string {
	s = NormalizeText(s)
	var b strings.Builder
	b.Grow(len(s))
	blank := 0 // consecutive blank lines written so far
	for i, line := range strings.Split(s, "\n") {
		line = strings.Join(strings.FieldsFunc(line, unicode.IsSpace), " ")
		if line == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
	}
	return b.String()
}
