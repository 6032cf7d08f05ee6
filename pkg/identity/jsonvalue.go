package identity

import (
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

type jsonKind uint8

const (
	kindNull jsonKind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k jsonKind) String() string {
	switch k {
	case kindNull:
		return "null"
	case kindBool:
		return "boolean"
	case kindNumber:
		return "number"
	case kindString:
		return "string"
	case kindArray:
		return "array"
	default:
		return "object"
	}
}

// jsonValue is a parsed JSON value. Object members are kept sorted in JCS
// order (UTF-16 code units), so encoding never has to sort again.
type jsonValue struct {
	kind    jsonKind
	boolean bool
	num     float64
	str     string
	arr     []jsonValue
	obj     []jsonMember
	offset  int // byte offset of the value's first byte in the input
}

type jsonMember struct {
	key    string
	val    jsonValue
	offset int // byte offset of the key's opening quote
}

// member returns the member named key, if any.
func (v *jsonValue) member(key string) (*jsonValue, bool) {
	i, found := slices.BinarySearchFunc(v.obj, key, func(m jsonMember, k string) int {
		return compareUTF16(m.key, k)
	})
	if !found {
		return nil, false
	}
	return &v.obj[i].val, true
}

// compareUTF16 orders strings by their UTF-16 code units, as RFC 8785
// section 3.2.3 requires. It differs from byte (code point) order only when a
// supplementary character (a surrogate pair, 0xD800-0xDFFF) meets a BMP
// character in 0xE000-0xFFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := firstUTF16Unit(ra), firstUTF16Unit(rb)
			if ua != ub {
				return int(ua) - int(ub)
			}
			// Same high surrogate: low surrogates order like the runes.
			return int(ra) - int(rb)
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func firstUTF16Unit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	hi, _ := utf16.EncodeRune(r)
	return hi
}
