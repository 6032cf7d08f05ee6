package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// pointer is a parsed RFC 6901 JSON pointer: its reference tokens, unescaped.
type pointer struct {
	text   string
	tokens []string
}

// parsePointer parses a JSON pointer. The empty pointer (the whole document) is not accepted:
// the settings use "" to mean the default.
func parsePointer(s string) (pointer, error) {
	if !strings.HasPrefix(s, "/") {
		return pointer{}, fmt.Errorf("JSON pointer %q must start with /", s)
	}
	raw := strings.Split(s[1:], "/")
	tokens := make([]string, len(raw))
	for i, tok := range raw {
		for j := 0; j < len(tok); j++ {
			if tok[j] == '~' && (j+1 == len(tok) || (tok[j+1] != '0' && tok[j+1] != '1')) {
				return pointer{}, fmt.Errorf("JSON pointer %q: ~ must be followed by 0 or 1", s)
			}
		}
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return pointer{text: s, tokens: tokens}, nil
}

// lookup returns the JSON text of the value p points at in body, and whether there is one.
// body must be one JSON document, as decodeJSON reads it (whose error it returns for anything
// else). It walks the bytes without decoding the document, which is the cost of every response
// an adapter reads: decoded into maps and interfaces, a small response took 25 allocations and
// about 5 µs. A name given twice in an object is taken at its last occurrence, as decoding it
// into a map does.
func (p pointer) lookup(body []byte) ([]byte, bool, error) {
	if !json.Valid(body) {
		if _, err := decodeJSON(body); err != nil {
			return nil, false, err
		}
		return nil, false, errors.New("invalid JSON")
	}
	v := body[skipSpace(body, 0):]
	v = v[:valueEnd(v, 0)]
	for _, tok := range p.tokens {
		var ok bool
		switch v[0] {
		case '{':
			v, ok = member(v, tok)
		case '[':
			v, ok = element(v, tok)
		}
		if !ok {
			return nil, false, nil
		}
	}
	return v, true, nil
}

// The functions below read JSON text that json.Valid accepted; none of them checks it again.

// member returns the value of the last member of obj named name.
func member(obj []byte, name string) ([]byte, bool) {
	var found []byte
	i := skipSpace(obj, 1)
	for obj[i] != '}' {
		keyEnd := valueEnd(obj, i)
		key := obj[i:keyEnd]
		i = skipSpace(obj, skipSpace(obj, keyEnd)+1) // past the colon
		end := valueEnd(obj, i)
		if keyIs(key, name) {
			found = obj[i:end]
		}
		i = skipSpace(obj, end)
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return found, found != nil
}

// element returns the array element at index tok.
func element(arr []byte, tok string) ([]byte, bool) {
	n, ok := arrayIndex(tok)
	if !ok {
		return nil, false
	}
	i := skipSpace(arr, 1)
	for k := 0; arr[i] != ']'; k++ {
		end := valueEnd(arr, i)
		if k == n {
			return arr[i:end], true
		}
		i = skipSpace(arr, end)
		if arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return nil, false
}

// keyIs reports whether the JSON string key (quotes included) decodes to name. Plain ASCII
// compares as it is; anything else (an escape, or a byte decoding replaces) is decoded.
func keyIs(key []byte, name string) bool {
	inner := key[1 : len(key)-1]
	if plainASCII(inner) {
		return string(inner) == name
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == name
}

// stringValue decodes the JSON string v (quotes included).
func stringValue(v []byte) string {
	if inner := v[1 : len(v)-1]; plainASCII(inner) {
		return string(inner)
	}
	var s string
	_ = json.Unmarshal(v, &s) // v is a valid JSON string
	return s
}

func plainASCII(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd returns the index just past the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; b[i] != '"'; i++ {
			if b[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = valueEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !strings.ContainsRune(" \t\n\r,}]", rune(b[i])) {
		i++
	}
	return i
}

// arrayIndex parses an RFC 6901 array index: "0" or digits without a leading zero.
func arrayIndex(tok string) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') || strings.Trim(tok, "0123456789") != "" {
		return 0, false
	}
	i, err := strconv.Atoi(tok)
	return i, err == nil
}

// decodeJSON decodes one JSON document, numbers kept as json.Number, and refuses trailing data.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// idAt returns the object id p points at in body: a non-empty string, or a number's text.
func idAt(p pointer, body []byte) (string, error) {
	v, ok, err := p.lookup(body)
	if err != nil {
		return "", fmt.Errorf("response body: %w", err)
	}
	if !ok {
		return "", fmt.Errorf("response body has nothing at %s", p.text)
	}
	switch c := v[0]; {
	case c == '"':
		id := stringValue(v)
		if id == "" {
			return "", fmt.Errorf("response body has an empty id at %s", p.text)
		}
		return id, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return string(v), nil
	}
	return "", fmt.Errorf("response body has %s at %s, want a string or a number", kind(v), p.text)
}

// kind names the type of a JSON value that is neither a string nor a number, for messages.
func kind(v []byte) string {
	switch v[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	}
	return "null"
}
