package canonicaljson

import (
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the kind of a JSON value.
type Kind uint8

// The kinds of JSON value.

const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

// String names the kind as an error message does ("boolean", "object").
func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	default:
		return "object"
	}
}

// Value is a parsed JSON value. Object members are kept sorted in JCS
// order (UTF-16 code units), so encoding never has to sort again: a Value built
// by hand must keep Obj in that order and its keys unique, or AppendCanonical
// writes a form that is not canonical and Member misses members.
type Value struct {
	Kind   Kind
	Bool   bool     // KindBool
	Num    float64  // KindNumber
	Str    string   // KindString
	Arr    []Value  // KindArray
	Obj    []Member // KindObject, in UTF-16 code unit order of Key
	Offset int      // byte offset of the value's first byte in the input; -1 if built
}

// Member is one member of an object.
type Member struct {
	Key    string
	Val    Value
	Offset int // byte offset of the key's opening quote
}

// Member returns the member named key, if any.
func (v *Value) Member(key string) (*Value, bool) {
	i, found := slices.BinarySearchFunc(v.Obj, key, func(m Member, k string) int {
		return compareUTF16(m.Key, k)
	})
	if !found {
		return nil, false
	}
	return &v.Obj[i].Val, true
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
