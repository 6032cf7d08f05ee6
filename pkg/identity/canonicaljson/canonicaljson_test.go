package canonicaljson

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// RFC 8785 Appendix B: IEEE 754 bit patterns and their required spelling.
var rfc8785NumberSamples = []struct {
	bits uint64
	want string
}{
	{0x0000000000000000, "0"},
	{0x8000000000000000, "0"},
	{0x0000000000000001, "5e-324"},
	{0x8000000000000001, "-5e-324"},
	{0x7fefffffffffffff, "1.7976931348623157e+308"},
	{0xffefffffffffffff, "-1.7976931348623157e+308"},
	{0x4340000000000000, "9007199254740992"},
	{0xc340000000000000, "-9007199254740992"},
	{0x4430000000000000, "295147905179352830000"},
	{0x44b52d02c7e14af5, "9.999999999999997e+22"},
	{0x44b52d02c7e14af6, "1e+23"},
	{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
	{0x444b1ae4d6e2ef4e, "999999999999999700000"},
	{0x444b1ae4d6e2ef4f, "999999999999999900000"},
	{0x444b1ae4d6e2ef50, "1e+21"},
	{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
	{0x3eb0c6f7a0b5ed8d, "0.000001"},
	{0x41b3de4355555553, "333333333.3333332"},
	{0x41b3de4355555554, "333333333.33333325"},
	{0x41b3de4355555555, "333333333.3333333"},
	{0x41b3de4355555556, "333333333.3333334"},
	{0x41b3de4355555557, "333333333.33333343"},
	{0xbecbf647612f3696, "-0.0000033333333333333333"},
	{0x43143ff3c1cb0959, "1424953923781206.2"},
}

func TestNumbersAreSpelledAsRFC8785AppendixB(t *testing.T) {
	for _, s := range rfc8785NumberSamples {
		require.Equal(t, s.want, string(AppendNumber(nil, math.Float64frombits(s.bits))), "bits %#016x", s.bits)
		// Every canonical spelling is itself accepted and is a fixed point.
		out, err := Canonicalize([]byte(s.want))
		require.NoError(t, err, s.want)
		require.Equal(t, s.want, string(out))
	}
}

func TestCanonicalJSONReproducesRFC8785SortingExample(t *testing.T) {
	// RFC 8785 section 3.2.3: UTF-16 order puts U+1F600 (a surrogate pair)
	// before U+FB33, although its code point is larger.
	in := `{
	  "\u20ac": "Euro Sign",
	  "\r": "Carriage Return",
	  "\ufb33": "Hebrew Letter Dalet With Dagesh",
	  "1": "One",
	  "\ud83d\ude00": "Emoji: Grinning Face",
	  "\u0080": "Control",
	  "\u00f6": "Latin Small Letter O With Diaeresis"
	}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\"," +
		"\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\"," +
		"\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	out, err := Canonicalize([]byte(in))
	require.NoError(t, err)
	require.Equal(t, want, string(out))
}

func TestCanonicalJSONReproducesRFC8785StructureExample(t *testing.T) {
	// RFC 8785 section 3.2.2, except that the RFC's first number,
	// 333333333.33333329, is spelled as its canonical value: the RFC rounds it
	// silently, atmost refuses it (see the next test).
	in := `{
	  "numbers": [333333333.3333333, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
	  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
	  "literals": [null, true, false]
	}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],` +
		`"string":"€$\u000f\nA'B\"\\\\\"/"}`
	out, err := Canonicalize([]byte(in))
	require.NoError(t, err)
	require.Equal(t, want, string(out))
}

func TestCanonicalJSONRefusesNumbersItWouldRound(t *testing.T) {
	_, err := Canonicalize([]byte(`[333333333.33333329]`))
	require.ErrorIs(t, err, ErrInexactNumber)
}

func TestCanonicalJSONSpellsValuesAsJCS(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"integer with fraction zero", `1.0`, `1`},
		{"exponent written out", `1e2`, `100`},
		{"large exponent stays exponential", `1e21`, `1e+21`},
		{"just below exponential", `1e20`, `100000000000000000000`},
		{"negative zero", `-0`, `0`},
		{"negative zero with fraction", `-0.0e7`, `0`},
		{"capital E", `1E30`, `1e+30`},
		{"trailing fraction zeros", `4.50`, `4.5`},
		{"small plain", `0.000001`, `0.000001`},
		{"small exponential", `1e-7`, `1e-7`},
		{"negative fraction", `-123e-2`, `-1.23`},
		{"exact large integer", `9007199254740992`, `9007199254740992`},
		{"zero with many zeros", `0.000000e-99999999999999999999`, `0`},
		{"long but exact mantissa", `100000000000000000000000000000e-29`, `1`},
		{"literals", ` [ true , false , null ] `, `[true,false,null]`},
		{"empty containers", `{"a":[],"b":{}}`, `{"a":[],"b":{}}`},
		{"nested sort", `{"b":{"z":1,"y":2},"a":[{"d":1,"c":2}]}`, `{"a":[{"c":2,"d":1}],"b":{"y":2,"z":1}}`},
		{"short escapes", `"\b\f\n\r\t\"\\"`, `"\b\f\n\r\t\"\\"`},
		{"other controls as lower-case hex", `"\u001F\u0000\u000B"`, `"\u001f\u0000\u000b"`},
		{"solidus unescaped", `"\/"`, `"/"`},
		{"DEL literal", `"\u007f"`, "\"\x7f\""},
		{"line separator literal", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"non-ASCII literal", `"\u00e9\u00C9"`, `"éÉ"`},
		{"surrogate pair to UTF-8", `"\uD83D\uDE00"`, "\"\U0001F600\""},
		{"raw UTF-8 kept", `"日本"`, `"日本"`},
		{"no normalization of strings", "\"e\u0301\"", "\"e\u0301\""},
		{"escaped key equals raw key order", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := Canonicalize([]byte(c.in))
			require.NoError(t, err)
			require.Equal(t, c.want, string(out))
			again, err := Canonicalize(out)
			require.NoError(t, err)
			require.Equal(t, out, again, "canonical form must be a fixed point")
		})
	}
}

func TestCanonicalJSONRefusesRatherThanRepairs(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	cases := []struct {
		name string
		in   string
		want error
	}{
		{"empty input", ``, ErrMalformedJSON},
		{"only white space", " \n", ErrMalformedJSON},
		{"byte order mark", "\ufeff{}", ErrMalformedJSON},
		{"unterminated object", `{"a":1`, ErrMalformedJSON},
		{"trailing comma in array", `[1,]`, ErrMalformedJSON},
		{"trailing comma in object", `{"a":1,}`, ErrMalformedJSON},
		{"missing colon", `{"a" 1}`, ErrMalformedJSON},
		{"unquoted key", `{a:1}`, ErrMalformedJSON},
		{"single quotes", `'a'`, ErrMalformedJSON},
		{"leading zero", `01`, ErrMalformedJSON},
		{"bare fraction", `.5`, ErrMalformedJSON},
		{"dangling point", `1.`, ErrMalformedJSON},
		{"plus sign", `+1`, ErrMalformedJSON},
		{"empty exponent", `1e`, ErrMalformedJSON},
		{"NaN", `NaN`, ErrMalformedJSON},
		{"Infinity", `-Infinity`, ErrMalformedJSON},
		{"truncated literal", `tru`, ErrMalformedJSON},
		{"raw control character in string", "\"a\tb\"", ErrMalformedJSON},
		{"unknown escape", `"\x41"`, ErrMalformedJSON},
		{"short unicode escape", `"\u12"`, ErrMalformedJSON},
		{"non-hex unicode escape", `"\u12g4"`, ErrMalformedJSON},
		{"unterminated string", `"abc`, ErrMalformedJSON},
		{"two values", `1 2`, ErrTrailingData},
		{"two objects", `{}{}`, ErrTrailingData},
		{"garbage after object", `{"a":1}x`, ErrTrailingData},
		{"duplicate key", `{"a":1,"a":1}`, ErrDuplicateKey},
		{"duplicate key through escape", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{"nested duplicate key", `{"a":[{"b":1,"c":2,"b":3}]}`, ErrDuplicateKey},
		{"invalid UTF-8 byte", "\"\xff\"", ErrInvalidUTF8},
		{"invalid UTF-8 in key", "{\"\xc3\":1}", ErrInvalidUTF8},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", ErrInvalidUTF8},
		{"overlong encoding", "\"\xc0\xaf\"", ErrInvalidUTF8},
		{"lone high surrogate escape", `"\ud800"`, ErrInvalidUTF8},
		{"lone low surrogate escape", `"\udc00"`, ErrInvalidUTF8},
		{"high surrogate then non-surrogate", `"\ud800\u0041"`, ErrInvalidUTF8},
		{"high surrogate then high surrogate", `"\ud800\ud800"`, ErrInvalidUTF8},
		{"integer beyond float64 precision", `12345678901234567890`, ErrInexactNumber},
		{"odd integer above 2^53", `9007199254740993`, ErrInexactNumber},
		{"fraction beyond precision", `0.10000000000000001`, ErrInexactNumber},
		{"overflow", `1e400`, ErrInexactNumber},
		{"negative overflow", `-1e309`, ErrInexactNumber},
		{"underflow to zero", `1e-400`, ErrInexactNumber},
		{"huge exponent", `1e99999999999999999999`, ErrInexactNumber},
		{"exact binary value but not its shortest spelling", `295147905179352825856`, ErrInexactNumber},
		{"nesting beyond the bound", deep, ErrTooDeep},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Canonicalize([]byte(c.in))
			require.ErrorIs(t, err, c.want)
			var je *Error
			require.ErrorAs(t, err, &je)
			require.GreaterOrEqual(t, je.Offset, 0)
			require.LessOrEqual(t, je.Offset, len(c.in))
		})
	}
}

func TestNestingAtTheBoundIsAccepted(t *testing.T) {
	in := strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)
	out, err := Canonicalize([]byte(in))
	require.NoError(t, err)
	require.Equal(t, in, string(out))
}

func TestCanonicalObjectRequiresAnObject(t *testing.T) {
	for _, in := range []string{`[]`, `1`, `"s"`, `null`, `true`} {
		_, err := CanonicalizeObject([]byte(in))
		require.ErrorIs(t, err, ErrNotObject, in)
	}
	out, err := CanonicalizeObject([]byte(` { "b" : 1 , "a" : 2 } `))
	require.NoError(t, err)
	require.Equal(t, `{"a":2,"b":1}`, string(out))
	_, err = CanonicalizeObject([]byte(`{"a":1,"a":2}`))
	require.ErrorIs(t, err, ErrDuplicateKey, "other failures are reported as for CanonicalJSON")
}

func TestJSONErrorNamesPathAndOffset(t *testing.T) {
	in := `{"a":[1,{"b":1,"b":2}]}`
	_, err := Canonicalize([]byte(in))
	var je *Error
	require.ErrorAs(t, err, &je)
	require.Equal(t, "$.a[1]", je.Path)
	require.Equal(t, strings.LastIndex(in, `"b"`), je.Offset)

	_, err = Canonicalize([]byte(`{"x y":[0, 1e999]}`))
	require.ErrorAs(t, err, &je)
	require.Equal(t, `$["x y"][1]`, je.Path)
	require.Equal(t, 11, je.Offset)
}

func TestJSONErrorDoesNotEchoLargeInput(t *testing.T) {
	long := strings.Repeat("k", 10000)
	for _, in := range []string{
		`{"` + long + `":1,"` + long + `":2}`,
		`[` + strings.Repeat("1", 5000) + `]`,
		`{"` + long + `":1e999}`,
	} {
		_, err := Canonicalize([]byte(in))
		require.Error(t, err)
		require.Less(t, len(err.Error()), 300, err.Error())
	}
}

func TestCompareUTF16OrdersSurrogatesBeforeHighBMP(t *testing.T) {
	require.Negative(t, compareUTF16("\U0001F600", "\uFB33"))
	require.Positive(t, compareUTF16("\uFB33", "\U0001F600"))
	require.Negative(t, compareUTF16("\U0001F600", "\U0001F601"))
	require.Negative(t, compareUTF16("a", "ab"))
	require.Zero(t, compareUTF16("ab", "ab"))
	require.Negative(t, compareUTF16("\u00e9", "\u0800"))
}

func TestJSONErrorUnwrapsToItsSentinel(t *testing.T) {
	_, err := Canonicalize([]byte(`{"a":1,"a":2}`))
	require.True(t, errors.Is(err, ErrDuplicateKey))
	require.False(t, errors.Is(err, ErrMalformedJSON))
	require.Contains(t, err.Error(), `"a"`)
}
