package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,false,null,"x"]}`,
		`{"numbers":[333333333.3333333,1E30,4.50,2e-3,0.000000000000000000000000001]}`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7}`,
		`"\u2028\u007f\u001f\"\\\/\b\f\n\r\t"`,
		`[1.0,1e2,1e21,1e20,-0,5e-324,1.7976931348623157e308,9007199254740993]`,
		`12345678901234567890`, `0.10000000000000001`, `1e400`, `1e-400`, `-0.0e-0`,
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `"\ud800"`, `"\udc00\ud800"`, "\"\xff\"",
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		``, ` `, `{}`, `[]`, `{"a":{}}x`, "\ufeff{}", `01`, `1.`, `-`, `"\u00"`, `{"a" 1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := CanonicalJSON(data)
		if err != nil {
			var je *JSONError
			if !errors.As(err, &je) {
				t.Fatalf("error is not a *JSONError: %v", err)
			}
			if je.Offset < 0 || je.Offset > len(data) {
				t.Fatalf("offset %d outside input of %d bytes", je.Offset, len(data))
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error echoes too much input: %d bytes", len(err.Error()))
			}
			return
		}
		if !utf8.Valid(out) {
			t.Fatalf("output is not valid UTF-8: %q", out)
		}
		again, err := CanonicalJSON(out)
		if err != nil {
			t.Fatalf("canonical output %q is refused: %v", out, err)
		}
		if !bytes.Equal(out, again) {
			t.Fatalf("not idempotent:\n%q\n%q", out, again)
		}
		// encoding/json must read input and output as the same value.
		if !json.Valid(data) {
			t.Fatalf("accepted input that encoding/json calls invalid: %q", data)
		}
		var in, canon any
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatalf("encoding/json cannot read accepted input: %v", err)
		}
		if err := json.Unmarshal(out, &canon); err != nil {
			t.Fatalf("encoding/json cannot read output %q: %v", out, err)
		}
		if !reflect.DeepEqual(in, canon) {
			t.Fatalf("value changed:\n in  %q -> %#v\n out %q -> %#v", data, in, out, canon)
		}
		obj, err := CanonicalObject(data)
		if _, isObject := in.(map[string]any); isObject != (err == nil) || isObject && !bytes.Equal(obj, out) {
			t.Fatalf("CanonicalObject disagrees with CanonicalJSON: %v", err)
		}
	})
}

func FuzzParseEnvelope(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"account":"acct-42","action":"post","target":"","request":{"text":"Hello, world"},"occurrence":""}`,
		`{"v":1,"account":"a","action":"like","target":"at://x/y","request":{}}`,
		`{"v":1.0,"account":"café.*>","action":"quote","request":{"text":" Cafe\u0301\r\n","embed":{"b":1e2,"a":[null]}},"occurrence":"2"}`,
		`{"v":1,"account":"a","action":"post","request":{"text":"x"},"source":{"id":" HTTPS://Ex.org:443#f ","version":"sv1:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}`,
		`{"v":1,"account":"a","action":"post","request":{"n":1e20,"text":"\u0958"}}`,
		`{"v":1,"v":1}`, `{"v":2}`, `[]`, `{"x":1}`, `{"v":1,"account":"a\u0000"}`, "{\"v\":1,\"account\":\"\xff\"}",
		`{"v":1,"account":"a","action":"post","request":{"text":1}}`,
		`{"v":1,"account":"a","action":"post","request":{},"source":{"id":"s","version":"sv1:x"}}`,
		`{"v":1,"account":"a","action":"post","request":{"a":12345678901234567890}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEnvelope(data)
		if err != nil {
			var re *RejectError
			if !errors.As(err, &re) {
				t.Fatalf("error is not a *RejectError: %v", err)
			}
			if !re.Reason.Valid() || re.Reason == ReasonUnknownAccount || re.Reason == ReasonInvalidHeader || re.Reason == ReasonUnstorable || re.Reason == ReasonMisdirectedReply || re.Reason == ReasonKeyMismatch || re.Reason == ReasonInvalidKeyHeader {
				t.Fatalf("ParseEnvelope returned reason %q", re.Reason)
			}
			if len(re.Detail) > 400 {
				t.Fatalf("detail echoes too much input: %d bytes", len(re.Detail))
			}
			return
		}
		c := e.Canonical()
		if len(c) > MaxEnvelopeBytes {
			t.Fatalf("canonical form of %d bytes exceeds the limit", len(c))
		}
		again, err := ParseEnvelope(c)
		if err != nil {
			t.Fatalf("canonical form %q is refused: %v", c, err)
		}
		if !again.Equal(e) || !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip changed the envelope:\n%#v\n%#v", e, again)
		}
		if again.DeliveryKey() != e.DeliveryKey() {
			t.Fatal("round trip changed the delivery key")
		}
		if !bytes.Equal(again.Canonical(), c) {
			t.Fatal("Canonical is not idempotent")
		}
		if jcs, err := CanonicalJSON(c); err != nil || !bytes.Equal(jcs, c) {
			t.Fatalf("Canonical is not RFC 8785 JSON: %v", err)
		}
		if err := CheckDeliveryKeyHeader(e, e.DeliveryKey().String()); err != nil {
			t.Fatalf("own key refused: %v", err)
		}
		if text, ok := e.Text(); ok && NormalizeText(text) != text {
			t.Fatalf("stored text %q is not normalized", text)
		}
		if tok := AccountToken(e.Account); strings.ContainsAny(tok, ".*> \t\r\n") || tok == "" {
			t.Fatalf("account token %q is not a subject token", tok)
		}
		built, err := NewEnvelope(e.Account, e.Action, e.Target, e.Request, e.Occurrence, e.Source)
		if err != nil || !built.Equal(e) {
			t.Fatalf("NewEnvelope disagrees with ParseEnvelope: %v", err)
		}
	})
}

// FuzzNormalization checks that every normalization is idempotent, which the
// envelope round trip and read-back comparison depend on.
func FuzzNormalization(f *testing.F) {
	for _, s := range []string{"", " a\r\n", "Cafe\u0301", "\u0958", "a\xffb", "http://Ex.org:80", "HTTPS://[::1]:443/?q#f",
		"\u3000x\u2028", "a \n\n\n b", "http://u@h:/p", "\u1100\u1161\u11a8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n := NormalizeText(s); NormalizeText(n) != n || !utf8.ValidString(n) {
			t.Fatalf("NormalizeText not idempotent on %q", s)
		}
		if n := NormalizeBody(s); NormalizeBody(n) != n {
			t.Fatalf("NormalizeBody not idempotent on %q", s)
		}
		if id, err := CanonicalSourceID(s); err == nil {
			again, err := CanonicalSourceID(id)
			if err != nil || again != id {
				t.Fatalf("CanonicalSourceID not idempotent on %q: %q then %q (%v)", s, id, again, err)
			}
		}
		tok := AccountToken(s)
		back, err := ParseAccountToken(tok)
		if err != nil || back != s {
			t.Fatalf("AccountToken does not invert on %q", s)
		}
	})
}
