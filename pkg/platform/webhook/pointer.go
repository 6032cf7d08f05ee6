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

// find returns the value p points at in doc (decoded with json.Number), and whether there is one.
func (p pointer) find(doc any) (any, bool) {
	v := doc
	for _, tok := range p.tokens {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, ok := arrayIndex(tok)
			if !ok || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
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
	doc, err := decodeJSON(body)
	if err != nil {
		return "", fmt.Errorf("response body: %w", err)
	}
	v, ok := p.find(doc)
	if !ok {
		return "", fmt.Errorf("response body has nothing at %s", p.text)
	}
	switch id := v.(type) {
	case string:
		if id == "" {
			return "", fmt.Errorf("response body has an empty id at %s", p.text)
		}
		return id, nil
	case json.Number:
		return id.String(), nil
	}
	return "", fmt.Errorf("response body has %s at %s, want a string or a number", kind(v), p.text)
}

// kind names a decoded JSON value's type for messages.
func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("a %T", v)
}
