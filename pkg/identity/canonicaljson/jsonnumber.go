package canonicaljson

import (
	"math"
	"strconv"
	"strings"
)

// exactFloat converts a JSON number literal to float64 and reports whether
// the conversion is exact in the sense that matters for hashing: the
// canonical (shortest round-trip) spelling of the float denotes the same
// decimal value as the literal. "1.0", "1e0" and "100e-2" pass; "0.1" passes
// because its shortest spelling is "0.1"; "12345678901234567890" and
// "0.10000000000000001" fail because the canonical output would be a
// different number from the one that was sent. Infinities (1e400) fail.
func exactFloat(lit string) (float64, bool) {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, decimalOf(lit) == decimalOf(strconv.FormatFloat(f, 'e', -1, 64))
}

// decimal is a number's exact value as sign, significant digits (no leading
// or trailing zeros) and a power-of-ten exponent. Zero has no digits and no
// sign, so -0 and 0 compare equal.
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// expLimit saturates exponents. Any literal whose exponent reaches it is far
// outside float64's range (about 1e-324 to 1e308) for every input that fits
// in memory, so clamping cannot make two different values compare equal.
const expLimit = 1 << 40

// decimalOf reads a number that matches the JSON number grammar.
func decimalOf(s string) decimal {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg = true
		s = s[1:]
	}
	mant, expPart := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, expPart = s[:i], s[i+1:]
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	exp := parseExponent(expPart) - int64(len(frac))
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return decimal{}
	}
	trimmed := strings.TrimRight(digits, "0")
	d.digits = trimmed
	d.exp = exp + int64(len(digits)-len(trimmed))
	return d
}

func parseExponent(s string) int64 {
	neg := false
	switch {
	case strings.HasPrefix(s, "-"):
		neg, s = true, s[1:]
	case strings.HasPrefix(s, "+"):
		s = s[1:]
	}
	var e int64
	for i := 0; i < len(s); i++ {
		e = e*10 + int64(s[i]-'0')
		if e >= expLimit {
			e = expLimit
			break
		}
	}
	if neg {
		return -e
	}
	return e
}

// AppendNumber appends f (finite) as ECMAScript's Number.prototype.toString
// spells it, which is what RFC 8785 section 3.2.2.3 requires: the shortest
// digits that round-trip, plain notation for exponents in [-7, 21), otherwise
// d.ddde±n; -0 is written as 0.
func AppendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest round-trip digits, as "d.dddde±xx" or "de±xx".
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	e, _ := strconv.Atoi(expStr)
	k := len(digits) // number of significant digits
	n := e + 1       // position of the decimal point relative to the digits
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, "0."...)
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}
