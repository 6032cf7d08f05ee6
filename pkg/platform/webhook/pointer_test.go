package webhook

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// RFC 6901 section 5's examples, and the edges of array indexes.
func TestJSONPointersFollowRFC6901(t *testing.T) {
	body := []byte(`{"foo":["bar","baz"],"":0,"a/b":1,"c%d":2,"e^f":3,"g|h":4,"i\\j":5,
		"k\"l":6," ":7,"m~n":8,"list":[{"id":"x"}]}`)
	for text, want := range map[string]any{
		"/foo/0":     "bar",
		"/":          "0",
		"/a~1b":      "1",
		"/c%d":       "2",
		"/e^f":       "3",
		"/g|h":       "4",
		"/i\\j":      "5",
		"/k\"l":      "6",
		"/ ":         "7",
		"/m~0n":      "8",
		"/list/0/id": "x",
	} {
		p, err := parsePointer(text)
		require.NoError(t, err, text)
		raw, ok, err := p.lookup(body)
		require.NoError(t, err, text)
		require.True(t, ok, text)
		got, err := decodeJSON(raw)
		require.NoError(t, err, text)
		require.Equal(t, want, asText(got), text)
	}
	for _, text := range []string{"/foo/2", "/foo/-", "/foo/01", "/foo/+1", "/foo/", "/missing", "/foo/0/x", "/list/0/id/x"} {
		p, err := parsePointer(text)
		require.NoError(t, err, text)
		_, ok, err := p.lookup(body)
		require.NoError(t, err, text)
		require.False(t, ok, text)
	}
	for _, text := range []string{"", "foo", "/a~", "/a~2", "/~x"} {
		_, err := parsePointer(text)
		require.Error(t, err, text)
	}
}

// lookup walks a response's bytes; what it finds is what decoding the whole document and
// following the pointer through its maps and slices finds (decoded finds, below): the same
// value, the same absence, the same error, and a string decoded alike.
func FuzzLookupFindsWhatDecodingFinds(f *testing.F) {
	for _, seed := range []struct{ body, pointer string }{
		{`{"id":"obj-1","text":"hello"}`, "/text"},
		{`{"id":1,"id":2}`, "/id"},
		{` {"a" : [ 1 , {"b":"\u00e9\n"} ] } `, "/a/1/b"},
		{`{"caf\u00e9":"x","café":"y"}`, "/café"},
		{`{"a\/b":{"~":[true,null,-1.5e3]}}`, "/a~1b/~0/2"},
		{`[[],{},"",0]`, "/3"},
		{`{"id":"a"} {"id":"b"}`, "/id"},
		{`{"id":"a"`, "/id"},
		{`{"t":"\ud800"}`, "/t"},
		{"{\"t\":\"\xff\"}", "/t"},
		{``, "/x"},
	} {
		f.Add([]byte(seed.body), seed.pointer)
	}
	f.Fuzz(func(t *testing.T, body []byte, text string) {
		p, err := parsePointer(text)
		if err != nil {
			return
		}
		raw, ok, err := p.lookup(body)
		doc, derr := decodeJSON(body)
		if derr != nil {
			require.EqualError(t, err, derr.Error())
			return
		}
		require.NoError(t, err)
		want, wantOK := decodedFinds(p, doc)
		require.Equal(t, wantOK, ok)
		if !ok {
			return
		}
		got, err := decodeJSON(raw)
		require.NoError(t, err)
		require.Equal(t, want, got)
		if s, isString := want.(string); isString {
			require.Equal(t, s, stringValue(raw))
		}
	})
}

// decodedFinds follows p through doc, decoded by decodeJSON: how the adapter found a value
// before it walked the bytes.
func decodedFinds(p pointer, doc any) (any, bool) {
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

func asText(v any) any {
	if s, ok := v.(interface{ String() string }); ok {
		return s.String()
	}
	return v
}

func TestDecodeJSONRefusesTrailingData(t *testing.T) {
	_, err := decodeJSON([]byte(`{"id":"a"} {"id":"b"}`))
	require.ErrorContains(t, err, "trailing")
	_, err = decodeJSON([]byte(`{"id":"a"}` + "\n"))
	require.NoError(t, err)
}

func TestIDAtAcceptsStringsAndNumbersOnly(t *testing.T) {
	p, err := parsePointer("/id")
	require.NoError(t, err)
	for body, want := range map[string]string{`{"id":"a1"}`: "a1", `{"id":42}`: "42", `{"id":1.5e3}`: "1.5e3"} {
		got, err := idAt(p, []byte(body))
		require.NoError(t, err, body)
		require.Equal(t, want, got, body)
	}
	for _, body := range []string{`{"id":""}`, `{"id":null}`, `{"id":true}`, `{"id":[1]}`, `{}`, `[]`, ``, `{"id":"a"`} {
		_, err := idAt(p, []byte(body))
		require.Error(t, err, body)
	}
}
