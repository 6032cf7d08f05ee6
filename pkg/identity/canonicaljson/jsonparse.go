package canonicaljson

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds how deeply arrays and objects may nest (the outermost
// array or object is depth 1). The bound keeps the recursive parser's stack
// small on hostile input; no legitimate request projection comes close.
const MaxDepth = 64

type pathElem struct {
	Key   string
	index int // -1 for an object member
}

// parser is a strict recursive-descent JSON parser. encoding/json cannot be
// used: it accepts duplicate keys and replaces invalid UTF-8 silently, and
// either would let two different messages hash alike.
type parser struct {
	data  []byte
	pos   int
	depth int
	path  []pathElem
}

// Parse parses exactly one JSON value surrounded by optional white space.
func Parse(data []byte) (Value, error) {
	return ParseAt(data, 0)
}

// ParseAt parses a value that will be embedded depth levels deep in a
// larger document, so that the whole document stays within MaxDepth.
func ParseAt(data []byte, depth int) (Value, error) {
	// The path is for error messages only; an envelope is a few levels deep, so its first
	// eight levels take one allocation rather than one per doubling.
	var path [8]pathElem
	p := parser{data: data, depth: depth, path: path[:0]}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos < len(p.data) {
		return Value{}, p.errAt(ErrTrailingData, p.pos, "unexpected %s after the value", p.describeByte(p.pos))
	}
	return v, nil
}

func (p *parser) errAt(kind error, offset int, format string, args ...any) error {
	return &Error{Err: kind, Offset: offset, Path: formatPath(p.path), Detail: fmt.Sprintf(format, args...)}
}

func formatPath(path []pathElem) string {
	var b strings.Builder
	b.WriteByte('$')
	for _, e := range path {
		if e.index >= 0 {
			fmt.Fprintf(&b, "[%d]", e.index)
		} else if isPlainName(e.Key) {
			b.WriteByte('.')
			b.WriteString(e.Key)
		} else {
			b.WriteByte('[')
			b.WriteString(quoteShort(e.Key))
			b.WriteByte(']')
		}
	}
	return b.String()
}

func isPlainName(s string) bool {
	if s == "" || len(s) > maxEchoBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (p *parser) describeByte(i int) string {
	if i >= len(p.data) {
		return "end of input"
	}
	return fmt.Sprintf("byte %s", strconv.QuoteRune(rune(p.data[i])))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value() (Value, error) {
	if p.pos >= len(p.data) {
		return Value{}, p.errAt(ErrMalformedJSON, p.pos, "unexpected end of input, expected a value")
	}
	start := p.pos
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.string()
		return Value{Kind: KindString, Str: s, Offset: start}, err
	case c == 't':
		return Value{Kind: KindBool, Bool: true, Offset: start}, p.literal("true")
	case c == 'f':
		return Value{Kind: KindBool, Offset: start}, p.literal("false")
	case c == 'n':
		return Value{Kind: KindNull, Offset: start}, p.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		f, err := p.number()
		return Value{Kind: KindNumber, Num: f, Offset: start}, err
	default:
		return Value{}, p.errAt(ErrMalformedJSON, p.pos, "unexpected %s, expected a value", p.describeByte(p.pos))
	}
}

func (p *parser) literal(word string) error {
	for i := 0; i < len(word); i++ {
		if p.pos+i >= len(p.data) || p.data[p.pos+i] != word[i] {
			return p.errAt(ErrMalformedJSON, p.pos+i, "unexpected %s in literal %s", p.describeByte(p.pos+i), word)
		}
	}
	p.pos += len(word)
	return nil
}

func (p *parser) enter(start int) error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errAt(ErrTooDeep, start, "nesting exceeds %d levels", MaxDepth)
	}
	return nil
}

func (p *parser) array() (Value, error) {
	v := Value{Kind: KindArray, Offset: p.pos}
	if err := p.enter(p.pos); err != nil {
		return Value{}, err
	}
	p.pos++ // '['
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		v.Arr = []Value{}
		return v, nil
	}
	for {
		p.path = append(p.path, pathElem{index: len(v.Arr)})
		p.skipSpace()
		elem, err := p.value()
		if err != nil {
			return Value{}, err
		}
		p.path = p.path[:len(p.path)-1]
		v.Arr = append(v.Arr, elem)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errAt(ErrMalformedJSON, p.pos, "unexpected end of input in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.depth--
			return v, nil
		default:
			return Value{}, p.errAt(ErrMalformedJSON, p.pos, "unexpected %s in array, expected ',' or ']'", p.describeByte(p.pos))
		}
	}
}

func (p *parser) object() (Value, error) {
	v := Value{Kind: KindObject, Offset: p.pos}
	if err := p.enter(p.pos); err != nil {
		return Value{}, err
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		v.Obj = []Member{}
		return v, nil
	}
	v.Obj = make([]Member, 0, 4) // an envelope's objects hold a few members: one allocation, not one per doubling
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.errAt(ErrMalformedJSON, p.pos, "unexpected %s in object, expected a member name", p.describeByte(p.pos))
		}
		keyAt := p.pos
		key, err := p.string()
		if err != nil {
			return Value{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.errAt(ErrMalformedJSON, p.pos, "unexpected %s after member name, expected ':'", p.describeByte(p.pos))
		}
		p.pos++
		p.skipSpace()
		p.path = append(p.path, pathElem{Key: key, index: -1})
		val, err := p.value()
		if err != nil {
			return Value{}, err
		}
		p.path = p.path[:len(p.path)-1]
		v.Obj = append(v.Obj, Member{Key: key, Val: val, Offset: keyAt})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errAt(ErrMalformedJSON, p.pos, "unexpected end of input in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			p.depth--
			return v, p.sortMembers(&v)
		default:
			return Value{}, p.errAt(ErrMalformedJSON, p.pos, "unexpected %s in object, expected ',' or '}'", p.describeByte(p.pos))
		}
	}
}

// sortMembers puts members in JCS order and refuses duplicates, naming the
// later of the two occurrences.
func (p *parser) sortMembers(v *Value) error {
	slices.SortStableFunc(v.Obj, func(a, b Member) int { return compareUTF16(a.Key, b.Key) })
	for i := 1; i < len(v.Obj); i++ {
		if v.Obj[i].Key == v.Obj[i-1].Key {
			at := max(v.Obj[i].Offset, v.Obj[i-1].Offset)
			return p.errAt(ErrDuplicateKey, at, "member %s appears more than once", quoteShort(v.Obj[i].Key))
		}
	}
	return nil
}

// string parses a JSON string starting at its opening quote and returns its
// value, which is always valid UTF-8.
func (p *parser) string() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes, only a validity scan.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := string(p.data[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		if err := p.plainByte(c); err != nil {
			return "", err
		}
	}
	buf := append([]byte(nil), p.data[start:p.pos]...)
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c == '\\':
			var err error
			if buf, err = p.escape(buf); err != nil {
				return "", err
			}
		default:
			at := p.pos
			if err := p.plainByte(c); err != nil {
				return "", err
			}
			buf = append(buf, p.data[at:p.pos]...)
		}
	}
	return "", p.errAt(ErrMalformedJSON, p.pos, "unexpected end of input in string")
}

// plainByte consumes one unescaped character (1-4 bytes) of a string.
func (p *parser) plainByte(c byte) error {
	if c < 0x20 {
		return p.errAt(ErrMalformedJSON, p.pos, "unescaped control character U+%04X in string", c)
	}
	if c < utf8.RuneSelf {
		p.pos++
		return nil
	}
	r, n := utf8.DecodeRune(p.data[p.pos:])
	if r == utf8.RuneError && n <= 1 {
		return p.errAt(ErrInvalidUTF8, p.pos, "byte 0x%02x is not valid UTF-8", c)
	}
	p.pos += n
	return nil
}

func (p *parser) escape(buf []byte) ([]byte, error) {
	at := p.pos
	if p.pos+1 >= len(p.data) {
		return nil, p.errAt(ErrMalformedJSON, p.pos, "unexpected end of input in escape")
	}
	c := p.data[p.pos+1]
	p.pos += 2
	switch c {
	case '"', '\\', '/':
		return append(buf, c), nil
	case 'b':
		return append(buf, '\b'), nil
	case 'f':
		return append(buf, '\f'), nil
	case 'n':
		return append(buf, '\n'), nil
	case 'r':
		return append(buf, '\r'), nil
	case 't':
		return append(buf, '\t'), nil
	case 'u':
	default:
		return nil, p.errAt(ErrMalformedJSON, at, "invalid escape \\%s", strconv.QuoteRuneToASCII(rune(c)))
	}
	r, err := p.hex4(at)
	if err != nil {
		return nil, err
	}
	switch {
	case utf16.IsSurrogate(r) && r < 0xDC00:
		// A high surrogate is valid only with a low surrogate escape next.
		if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
			save := p.pos
			p.pos += 2
			lo, err := p.hex4(save)
			if err != nil {
				return nil, err
			}
			if lo >= 0xDC00 && lo <= 0xDFFF {
				return utf8.AppendRune(buf, utf16.DecodeRune(r, lo)), nil
			}
		}
		return nil, p.errAt(ErrInvalidUTF8, at, "escape \\u%04x is a lone high surrogate", r)
	case utf16.IsSurrogate(r):
		return nil, p.errAt(ErrInvalidUTF8, at, "escape \\u%04x is a lone low surrogate", r)
	}
	return utf8.AppendRune(buf, r), nil
}

// hex4 reads the four hex digits of a \u escape that starts at escAt.
func (p *parser) hex4(escAt int) (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.errAt(ErrMalformedJSON, escAt, "truncated \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.errAt(ErrMalformedJSON, escAt, "non-hex digit in \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

// number parses a JSON number and returns its float64 value, refusing any
// number whose canonical spelling would denote a different decimal value.
func (p *parser) number() (float64, error) {
	start := p.pos
	d := p.data
	i := p.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
		if i < len(d) && d[i] >= '0' && d[i] <= '9' {
			return 0, p.errAt(ErrMalformedJSON, i, "leading zero in number")
		}
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	default:
		return 0, p.errAt(ErrMalformedJSON, i, "unexpected %s in number, expected a digit", p.describeByte(i))
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return 0, p.errAt(ErrMalformedJSON, i, "unexpected %s after decimal point, expected a digit", p.describeByte(i))
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return 0, p.errAt(ErrMalformedJSON, i, "unexpected %s in exponent, expected a digit", p.describeByte(i))
		}
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
	}
	p.pos = i
	lit := string(d[start:i])
	f, ok := exactFloat(lit)
	if !ok {
		return 0, p.errAt(ErrInexactNumber, start, "%s has no exact float64 spelling", quoteShort(lit))
	}
	return f, nil
}
