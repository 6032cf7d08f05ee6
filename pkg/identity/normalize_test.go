package identity

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
)

func TestNormalizeTextAppliesOnlyNFCLineEndsAndTrim(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"already normal", "Hello, world", "Hello, world"},
		{"NFD composed to NFC", "Cafe\u0301", "Caf\u00e9"},
		{"Hangul jamo composed", "\u1112\u1161\u11ab", "\ud55c"},
		{"CRLF to LF", "a\r\nb", "a\nb"},
		{"lone CR to LF", "a\rb", "a\nb"},
		{"CR CR LF is two line ends", "a\r\r\nb", "a\n\nb"},
		{"surrounding ASCII white space trimmed", " \t\n a b \r\n\t", "a b"},
		{"surrounding Unicode white space trimmed", "\u00a0\u3000\u2028a\u2009", "a"},
		{"interior double space kept", "a  b", "a  b"},
		{"interior tab and blank lines kept", "a\tb\n\n\nc", "a\tb\n\n\nc"},
		{"interior line separator kept", "a\u2028b", "a\u2028b"},
		{"case and punctuation kept", "Ab.  ¡C!", "Ab.  ¡C!"},
		{"zero-width space is not white space", "\u200ba\u200b", "\u200ba\u200b"},
		{"invalid UTF-8 replaced", "a\xffb", "a\ufffdb"},
		{"run of invalid bytes replaced once", "a\xff\xfe\xfdb", "a\ufffdb"},
		{"only white space", " \r\n\t ", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, NormalizeText(c.in))
		})
	}
}

func TestNormalizeBodyRemovesWhiteSpaceChurn(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"runs of spaces collapse", "a  \t b", "a b"},
		{"line ends trimmed", "  a  \n\t b \t", "a\nb"},
		{"blank-line runs collapse to one", "a\n\n\n\n b", "a\n\nb"},
		{"white-space-only lines are blank", "a\n \t \n\u00a0\nb", "a\n\nb"},
		{"single blank line kept", "a\n\nb", "a\n\nb"},
		{"CRLF blank lines", "a\r\n\r\n\r\nb\r\n", "a\n\nb"},
		{"Unicode spaces collapse", "a\u2003\u00a0b", "a b"},
		{"NFC applied", "e\u0301 e\u0301", "\u00e9 \u00e9"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, NormalizeBody(c.in))
		})
	}
}

func TestSameTextIgnoresOnlyNormalization(t *testing.T) {
	require.True(t, SameText("Caf\u00e9\r\nok ", " Cafe\u0301\nok"))
	require.False(t, SameText("a b", "a  b"), "interior white space is visible")
	require.False(t, SameText("a", "A"), "case is visible")
	require.False(t, SameText("caf\u00e9", "cafe"), "a dropped accent is a different text")
}

// trickyRunes are characters where normalization rules interact: combining
// marks, white space of every kind, line ends, Hangul jamo, singletons and
// composition exclusions.
var trickyRunes = []rune{
	'a', 'e', 'A', ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0xa0, 0x1680, 0x2000, 0x2001,
	0x2009, 0x2028, 0x2029, 0x3000, 0x200b, 0x0301, 0x0308, 0x0327, 0x0344, 0x0958, 0x093c,
	0x1100, 0x1161, 0x11a8, 0xac00, 0x212b, 0x2126, 0xf900, 0x1f600, 0xfffd, 0x0000, '.', '~',
}

func randomTrickyString(r *rand.Rand, maxRunes int) string {
	var b strings.Builder
	n := r.IntN(maxRunes + 1)
	for range n {
		switch r.IntN(20) {
		case 0:
			b.WriteByte(byte(0x80 + r.IntN(0x80))) // a stray invalid byte
		case 1:
			b.WriteRune(rune(r.IntN(0x3000)))
		default:
			b.WriteRune(trickyRunes[r.IntN(len(trickyRunes))])
		}
	}
	return b.String()
}

func TestNormalizationIsIdempotentAndValid(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		s := randomTrickyString(r, 12)
		text := NormalizeText(s)
		require.Equal(t, text, NormalizeText(text), "NormalizeText(%q)", s)
		require.True(t, utf8.ValidString(text))
		require.True(t, norm.NFC.IsNormalString(text))
		require.NotContains(t, text, "\r")
		body := NormalizeBody(s)
		require.Equal(t, body, NormalizeBody(body), "NormalizeBody(%q)", s)
		require.Equal(t, body, NormalizeBody(text), "NormalizeBody includes NormalizeText")
		require.NotContains(t, body, "\n\n\n")
	}
}
