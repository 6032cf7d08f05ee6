package webhook

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// RFC 6901 section 5's examples, and the edges of array indexes.
func TestJSONPointersFollowRFC6901(t *testing.T) {
	doc, err := decodeJSON([]byte(`{"foo":["bar","baz"],"":0,"a/b":1,"c%d":2,"e^f":3,"g|h":4,"i\\j":5,
		"k\"l":6," ":7,"m~n":8,"list":[{"id":"x"}]}`))
	require.NoError(t, err)
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
		got, ok := p.find(doc)
		require.True(t, ok, text)
		require.Equal(t, want, asText(got), text)
	}
	for _, text := range []string{"/foo/2", "/foo/-", "/foo/01", "/foo/+1", "/foo/", "/missing", "/foo/0/x", "/list/0/id/x"} {
		p, err := parsePointer(text)
		require.NoError(t, err, text)
		_, ok := p.find(doc)
		require.False(t, ok, text)
	}
	for _, text := range []string{"", "foo", "/a~", "/a~2", "/~x"} {
		_, err := parsePointer(text)
		require.Error(t, err, text)
	}
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
