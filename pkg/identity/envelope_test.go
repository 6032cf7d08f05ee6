package identity

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func mustEnvelope(t testing.TB, s string) Envelope {
	t.Helper()
	e, err := ParseEnvelope([]byte(s))
	require.NoError(t, err, s)
	return e
}

const validVersion = "sv1:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestParseEnvelopeAcceptsTheDesignExample(t *testing.T) {
	e := mustEnvelope(t, `{
	  "v": 1,
	  "account": "acct-42",
	  "action": "post",
	  "target": "",
	  "request": {"text": "Hello, world"},
	  "occurrence": "",
	  "source": {"id": "https://example.org/a", "version": "`+validVersion+`"}
	}`)
	require.Equal(t, 1, e.V)
	require.Equal(t, "acct-42", e.Account)
	require.Equal(t, "post", e.Action)
	require.Equal(t, "", e.Target)
	require.Equal(t, `{"text":"Hello, world"}`, string(e.Request))
	require.Equal(t, "", e.Occurrence)
	require.Equal(t, &Source{ID: "https://example.org/a", Version: mustVersion(t, validVersion)}, e.Source)
	text, ok := e.Text()
	require.True(t, ok)
	require.Equal(t, "Hello, world", text)
	th, ok := e.TextHash()
	require.True(t, ok)
	require.Equal(t, NewTextHash("Hello, world"), th)
}

func mustVersion(t testing.TB, s string) SourceVersion {
	t.Helper()
	v, err := ParseSourceVersion(s)
	require.NoError(t, err)
	return v
}

func TestParseEnvelopeCanonicalizesTheRequest(t *testing.T) {
	e := mustEnvelope(t, `{"v":1.0,"account":"a","action":"quote","request":{
	  "text":"  Cafe\u0301\r\nbar  ", "link":{"z":1.50,"a":"x"}, "nested":{"text":" not normalized "}}}`)
	require.Equal(t, `{"link":{"a":"x","z":1.5},"nested":{"text":" not normalized "},"text":"Café\nbar"}`, string(e.Request))
	text, ok := e.Text()
	require.True(t, ok)
	require.Equal(t, "Café\nbar", text)
}

func TestEnvelopeWithoutTextHasNoTextHash(t *testing.T) {
	e := mustEnvelope(t, `{"v":1,"account":"a","action":"like","target":"post-1","request":{}}`)
	_, ok := e.Text()
	require.False(t, ok)
	_, ok = e.TextHash()
	require.False(t, ok)
}

func TestEnvelopeCanonicalFormRoundTrips(t *testing.T) {
	e := mustEnvelope(t, ` {"source":{"version":"`+validVersion+`","id":" HTTPS://Example.org "},
	  "request":{"b":[1e2,true,null],"text":"x\r\ny"},"occurrence":"o","target":"t","action":"post","account":"α β","v":1} `)
	c := e.Canonical()
	require.Equal(t, `{"account":"α β","action":"post","occurrence":"o","request":{"b":[100,true,null],"text":"x\ny"},`+
		`"source":{"id":"https://example.org/","version":"`+validVersion+`"},"target":"t","v":1}`, string(c))
	again := mustEnvelope(t, string(c))
	require.True(t, e.Equal(again))
	require.Equal(t, e, again)
	require.Equal(t, e.DeliveryKey(), again.DeliveryKey())
	jcs, err := CanonicalJSON(c)
	require.NoError(t, err)
	require.Equal(t, c, jcs, "Canonical is RFC 8785 JSON")

	bare := mustEnvelope(t, `{"v":1,"account":"a","action":"like","request":{}}`)
	require.Equal(t, `{"account":"a","action":"like","occurrence":"","request":{},"target":"","v":1}`, string(bare.Canonical()))
}

func TestEnvelopeEqualComparesEveryField(t *testing.T) {
	base := mustEnvelope(t, `{"v":1,"account":"a","action":"post","target":"t","occurrence":"o","request":{"text":"x"},
	  "source":{"id":"s","version":"`+validVersion+`"}}`)
	require.True(t, base.Equal(base))
	mutations := []func(*Envelope){
		func(e *Envelope) { e.V = 2 },
		func(e *Envelope) { e.Account = "b" },
		func(e *Envelope) { e.Action = "like" },
		func(e *Envelope) { e.Target = "u" },
		func(e *Envelope) { e.Occurrence = "p" },
		func(e *Envelope) { e.Request = []byte(`{"text":"y"}`) },
		func(e *Envelope) { e.Source = nil },
		func(e *Envelope) { e.Source = &Source{ID: "s2", Version: e.Source.Version} },
	}
	for i, mutate := range mutations {
		m := base
		m.Source = &Source{ID: base.Source.ID, Version: base.Source.Version}
		mutate(&m)
		require.False(t, base.Equal(m), "mutation %d", i)
		require.False(t, m.Equal(base), "mutation %d", i)
	}
}

type rejectCase struct {
	name   string
	in     string
	reason Reason
	detail string // a substring the detail must contain
}

func envelopeRejectCases() []rejectCase {
	big := `{"v":1,"account":"a","action":"post","request":{"text":"` + strings.Repeat("x", MaxEnvelopeBytes) + `"}}`
	// Each 1e20 is 4 bytes sent and 21 bytes canonical.
	grows := `{"v":1,"account":"a","action":"post","request":{"n":[` +
		strings.TrimSuffix(strings.Repeat("1e20,", 10000), ",") + `]}}`
	return []rejectCase{
		{"not JSON", `{"v":1,`, ReasonMalformedJSON, "end of input"},
		{"empty message", ``, ReasonMalformedJSON, "end of input"},
		{"two objects", `{"v":1}{"v":1}`, ReasonMalformedJSON, "byte 7"},
		{"nesting outside request", `{"v":1,"account":"a","action":"post","request":{},"x":` +
			strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, ReasonMalformedJSON, "nesting"},
		{"inexact number outside request", `{"v":1.00000000000000001}`, ReasonMalformedJSON, "$.v"},
		{"array", `[1]`, ReasonNotObject, "an array"},
		{"not_before not a time", `{"v":1,"account":"a","action":"post","request":{},"not_before":"tomorrow"}`, ReasonInvalidTime, "not an RFC 3339 time"},
		{"expires_at a number", `{"v":1,"account":"a","action":"post","request":{},"expires_at":1765000000}`, ReasonInvalidTime, "must be an RFC 3339 string"},
		{"expires_at not after not_before", `{"v":1,"account":"a","action":"post","request":{},"not_before":"2026-12-07T09:00:00Z","expires_at":"2026-12-07T10:00:00+01:00"}`, ReasonInvalidTime, "is not after not_before"},
		{"not_before before 2000", `{"v":1,"account":"a","action":"post","request":{},"not_before":"1999-12-31T23:59:59Z"}`, ReasonInvalidTime, "before the year 2000"},
		{"string", `"post"`, ReasonNotObject, "a string"},
		{"duplicate top-level field", `{"v":1,"v":1}`, ReasonDuplicateField, `"v"`},
		{"duplicate field in request", `{"v":1,"account":"a","action":"post","request":{"text":"a","text":"b"}}`, ReasonDuplicateField, "$.request"},
		{"unknown top-level field", `{"v":1,"account":"a","action":"post","request":{},"priority":1}`, ReasonUnknownField, `"priority" at byte 50`},
		{"first unknown field in message order", `{"zz":1,"aa":2,"v":1}`, ReasonUnknownField, `"zz"`},
		{"unknown field in source", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"s","version":"` + validVersion + `","at":1}}`, ReasonUnknownField, `"at" in source`},
		{"missing v", `{"account":"a","action":"post","request":{}}`, ReasonMissingField, `"v"`},
		{"missing account", `{"v":1,"action":"post","request":{}}`, ReasonMissingField, `"account"`},
		{"missing action", `{"v":1,"account":"a","request":{}}`, ReasonMissingField, `"action"`},
		{"missing request", `{"v":1,"account":"a","action":"post"}`, ReasonMissingField, `"request"`},
		{"missing source id", `{"v":1,"account":"a","action":"post","request":{},"source":{"version":"` + validVersion + `"}}`, ReasonMissingField, `"source.id"`},
		{"missing source version", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"s"}}`, ReasonMissingField, `"source.version"`},
		{"version 2", `{"v":2,"account":"a","action":"post","request":{}}`, ReasonUnsupportedVersion, "v is 2"},
		{"version as string", `{"v":"1","account":"a","action":"post","request":{}}`, ReasonUnsupportedVersion, "a string"},
		{"version fraction", `{"v":1.5,"account":"a","action":"post","request":{}}`, ReasonUnsupportedVersion, "1.5"},
		{"invalid UTF-8 byte", "{\"v\":1,\"account\":\"a\xff\"}", ReasonInvalidUTF8, "0xff at byte 19"},
		{"lone surrogate escape", `{"v":1,"account":"a\ud800","action":"post","request":{}}`, ReasonInvalidUTF8, "surrogate"},
		{"over 64 KiB", big, ReasonTooLarge, "limit is 65536"},
		{"canonical form over 64 KiB", grows, ReasonTooLarge, "canonical form"},
		{"empty account", `{"v":1,"account":"","action":"post","request":{}}`, ReasonInvalidAccount, "empty"},
		{"account too long", `{"v":1,"account":"` + strings.Repeat("a", 129) + `","action":"post","request":{}}`, ReasonInvalidAccount, "129 bytes"},
		{"account with control character", `{"v":1,"account":"a\u0007b","action":"post","request":{}}`, ReasonInvalidAccount, "U+0007 at byte 1"},
		{"account with C1 control", `{"v":1,"account":"a\u0085","action":"post","request":{}}`, ReasonInvalidAccount, "U+0085"},
		{"account as number", `{"v":1,"account":42,"action":"post","request":{}}`, ReasonInvalidAccount, "a number"},
		{"account null", `{"v":1,"account":null,"action":"post","request":{}}`, ReasonInvalidAccount, "null"},
		{"empty action", `{"v":1,"account":"a","action":"","request":{}}`, ReasonInvalidAction, "empty"},
		{"upper-case action", `{"v":1,"account":"a","action":"Post","request":{}}`, ReasonInvalidAction, `"Post"`},
		{"action starting with a digit", `{"v":1,"account":"a","action":"1post","request":{}}`, ReasonInvalidAction, "byte 0"},
		{"action with a dash", `{"v":1,"account":"a","action":"re-post","request":{}}`, ReasonInvalidAction, "byte 2"},
		{"action too long", `{"v":1,"account":"a","action":"` + strings.Repeat("a", 33) + `","request":{}}`, ReasonInvalidAction, "33 bytes"},
		{"target as number", `{"v":1,"account":"a","action":"like","target":1,"request":{}}`, ReasonInvalidTarget, "a number"},
		{"target null", `{"v":1,"account":"a","action":"like","target":null,"request":{}}`, ReasonInvalidTarget, "null"},
		{"target too long", `{"v":1,"account":"a","action":"like","target":"` + strings.Repeat("t", 1025) + `","request":{}}`, ReasonInvalidTarget, "1025 bytes"},
		{"target with newline", `{"v":1,"account":"a","action":"like","target":"a\nb","request":{}}`, ReasonInvalidTarget, "U+000A"},
		{"request as string", `{"v":1,"account":"a","action":"post","request":"hi"}`, ReasonInvalidRequest, "a string"},
		{"request null", `{"v":1,"account":"a","action":"post","request":null}`, ReasonInvalidRequest, "null"},
		{"request text not a string", `{"v":1,"account":"a","action":"post","request":{"text":["hi"]}}`, ReasonInvalidRequest, "request.text"},
		{"inexact number in request", `{"v":1,"account":"a","action":"post","request":{"n":12345678901234567890}}`, ReasonInvalidRequest, "$.request.n"},
		{"request nested too deep", `{"v":1,"account":"a","action":"post","request":{"n":` +
			strings.Repeat("[", 63) + strings.Repeat("]", 63) + `}}`, ReasonInvalidRequest, "nesting"},
		{"occurrence as number", `{"v":1,"account":"a","action":"post","request":{},"occurrence":2}`, ReasonInvalidOccurrence, "a number"},
		{"occurrence too long", `{"v":1,"account":"a","action":"post","request":{},"occurrence":"` + strings.Repeat("o", 129) + `"}`, ReasonInvalidOccurrence, "129 bytes"},
		{"occurrence with control", `{"v":1,"account":"a","action":"post","request":{},"occurrence":"\t"}`, ReasonInvalidOccurrence, "U+0009"},
		{"source as string", `{"v":1,"account":"a","action":"post","request":{},"source":"s"}`, ReasonInvalidSource, "a string"},
		{"source null", `{"v":1,"account":"a","action":"post","request":{},"source":null}`, ReasonInvalidSource, "null"},
		{"empty source id", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":" ","version":"` + validVersion + `"}}`, ReasonInvalidSource, "empty source id"},
		{"source id too long", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"` + strings.Repeat("s", 2049) + `","version":"` + validVersion + `"}}`, ReasonInvalidSource, "2049 bytes"},
		{"source id with control", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"a\u0000b","version":"` + validVersion + `"}}`, ReasonInvalidSource, "U+0000"},
		{"source id as number", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":1,"version":"` + validVersion + `"}}`, ReasonInvalidSource, "a number"},
		{"source version malformed", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"s","version":"sv1:ABC"}}`, ReasonInvalidSource, "source.version"},
		{"source version upper-case", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"s","version":"` + strings.ToUpper(validVersion) + `"}}`, ReasonInvalidSource, "source.version"},
		{"source version of another identity", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"s","version":"dk1:` + validVersion[4:] + `"}}`, ReasonInvalidSource, "source.version"},
		{"source version zero", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"s","version":"sv1:` + strings.Repeat("0", 64) + `"}}`, ReasonInvalidSource, "zero"},
		{"source version as number", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"s","version":1}}`, ReasonInvalidSource, "a number"},
	}
}

func TestParseEnvelopeRejectsEachViolationWithItsReason(t *testing.T) {
	for _, c := range envelopeRejectCases() {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseEnvelope([]byte(c.in))
			var re *RejectError
			require.ErrorAs(t, err, &re)
			require.Equal(t, c.reason, re.Reason, re.Detail)
			require.Contains(t, re.Detail, c.detail)
			require.Less(t, len(re.Detail), 300, "a detail never carries the payload")
			require.Contains(t, err.Error(), string(c.reason))
		})
	}
}

func TestEnvelopeSizeLimitIsInclusive(t *testing.T) {
	prefix := `{"v":1,"account":"a","action":"post","request":{"text":"`
	suffix := `"}}`
	// The canonical form adds ,"occurrence":"" and ,"target":"" (28 bytes),
	// so leave room for them.
	fill := MaxEnvelopeBytes - len(prefix) - len(suffix) - 28
	exact := prefix + strings.Repeat("x", fill) + suffix
	e, err := ParseEnvelope([]byte(exact))
	require.NoError(t, err)
	require.Equal(t, MaxEnvelopeBytes, len(e.Canonical()))

	padded := exact[:len(exact)-1] + strings.Repeat(" ", 28) + "}"
	require.Equal(t, MaxEnvelopeBytes, len(padded))
	_, err = ParseEnvelope([]byte(padded))
	require.NoError(t, err, "exactly MaxEnvelopeBytes is accepted")
	_, err = ParseEnvelope([]byte(padded + " "))
	var re *RejectError
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReasonTooLarge, re.Reason)
}

func TestEveryRejectionReasonIsInTheClosedList(t *testing.T) {
	produced := map[Reason]bool{}
	for _, c := range envelopeRejectCases() {
		_, err := ParseEnvelope([]byte(c.in))
		var re *RejectError
		require.ErrorAs(t, err, &re)
		require.True(t, re.Reason.Valid(), "%s: %q", c.name, re.Reason)
		produced[re.Reason] = true
	}
	e := mustEnvelope(t, `{"v":1,"account":"a","action":"like","request":{}}`)
	for _, header := range []string{"garbage", "dk1:" + strings.Repeat("0", 64)} {
		var re *RejectError
		require.ErrorAs(t, CheckDeliveryKeyHeader(e, header), &re)
		require.True(t, re.Reason.Valid())
		produced[re.Reason] = true
	}
	// Every listed reason except ingest's decisions (subject_mismatch,
	// unknown_account, invalid_header, unstorable, misdirected_reply) is produced by some case
	// above, so the list has no dead entries either.
	for _, r := range AllReasons() {
		if r == ReasonSubjectMismatch || r == ReasonUnknownAccount || r == ReasonInvalidHeader || r == ReasonUnstorable || r == ReasonMisdirectedReply {
			continue
		}
		require.True(t, produced[r], "no test produces %s", r)
	}
}

func TestReasonsAreDistinctSubjectTokens(t *testing.T) {
	seen := map[Reason]bool{}
	for _, r := range AllReasons() {
		require.False(t, seen[r], r)
		seen[r] = true
		require.True(t, r.Valid())
		require.Regexp(t, `^[a-z][a-z0-9_]*$`, string(r))
		require.Equal(t, string(r), r.String())
	}
	require.False(t, Reason("bogus").Valid())
	require.False(t, Reason("").Valid())
	all := AllReasons()
	all[0] = "mutated"
	require.Equal(t, ReasonMalformedJSON, AllReasons()[0], "AllReasons returns a copy")
}

func TestRejectErrorIsMatchedWithErrorsAs(t *testing.T) {
	_, err := ParseEnvelope([]byte(`[]`))
	wrapped := errors.Join(errors.New("ingest"), err)
	var re *RejectError
	require.True(t, errors.As(wrapped, &re))
	require.Equal(t, ReasonNotObject, re.Reason)
	require.Equal(t, "identity: rejected: not_object: the message is an array, not an object", err.Error())
}

func TestDeliveryKeyHeaderConfirmsButNeverOverrides(t *testing.T) {
	e := mustEnvelope(t, `{"v":1,"account":"a","action":"post","request":{"text":"hi"}}`)
	key := e.DeliveryKey().String()
	require.NoError(t, CheckDeliveryKeyHeader(e, ""))
	require.NoError(t, CheckDeliveryKeyHeader(e, " \t"))
	require.NoError(t, CheckDeliveryKeyHeader(e, key))
	require.NoError(t, CheckDeliveryKeyHeader(e, " "+key+"\t"))

	other := mustEnvelope(t, `{"v":1,"account":"a","action":"post","request":{"text":"ho"}}`).DeliveryKey().String()
	cases := []struct {
		header string
		reason Reason
	}{
		{other, ReasonKeyMismatch},
		{strings.ToUpper(key), ReasonInvalidKeyHeader},
		{key[:len(key)-1], ReasonInvalidKeyHeader},
		{"sv1:" + key[4:], ReasonInvalidKeyHeader},
		{key[4:], ReasonInvalidKeyHeader},
		{key + "," + key, ReasonInvalidKeyHeader},
	}
	for _, c := range cases {
		var re *RejectError
		require.ErrorAs(t, CheckDeliveryKeyHeader(e, c.header), &re, c.header)
		require.Equal(t, c.reason, re.Reason, c.header)
	}
	var re *RejectError
	require.ErrorAs(t, CheckDeliveryKeyHeader(e, other), &re)
	require.Contains(t, re.Detail, other)
	require.Contains(t, re.Detail, key)
}

func TestNewEnvelopeAgreesWithParseEnvelope(t *testing.T) {
	src := &Source{ID: " HTTPS://Example.org/a#x ", Version: mustVersion(t, validVersion)}
	built, err := NewEnvelope("acct", "post", "t", []byte(`{ "text": " Cafe\u0301 ", "n": 1.0 }`), "o", src)
	require.NoError(t, err)
	parsed := mustEnvelope(t, `{"v":1,"account":"acct","action":"post","target":"t","occurrence":"o",
	  "request":{"n":1,"text":"Café"},"source":{"id":"https://example.org/a","version":"`+validVersion+`"}}`)
	require.Equal(t, parsed, built)
	require.Equal(t, "https://example.org/a", built.Source.ID)
	require.Equal(t, " HTTPS://Example.org/a#x ", src.ID, "the caller's Source is not modified")

	deep := strings.Repeat("[", 63) + strings.Repeat("]", 63)
	_, err = NewEnvelope("acct", "post", "", []byte(`{"n":`+deep+`}`), "", nil)
	var re *RejectError
	require.ErrorAs(t, err, &re, "the request's depth counts inside the envelope")
	require.Equal(t, ReasonInvalidRequest, re.Reason)

	for _, c := range []struct {
		err    error
		reason Reason
	}{
		{func() error { _, err := NewEnvelope("a\xff", "post", "", []byte(`{}`), "", nil); return err }(), ReasonInvalidUTF8},
		{func() error { _, err := NewEnvelope("a", "post", "", []byte(`{"a":1,"a":2}`), "", nil); return err }(), ReasonDuplicateField},
		{func() error { _, err := NewEnvelope("a", "post", "", []byte(`[]`), "", nil); return err }(), ReasonInvalidRequest},
		{func() error { _, err := NewEnvelope("a", "Post", "", []byte(`{}`), "", nil); return err }(), ReasonInvalidAction},
		{func() error { _, err := NewEnvelope("", "post", "", []byte(`{}`), "", nil); return err }(), ReasonMissingField},
		{func() error { _, err := NewEnvelope("a", "", "", []byte(`{}`), "", nil); return err }(), ReasonMissingField},
		{func() error {
			_, err := NewEnvelope("a", "post", "", []byte(`{}`), "", &Source{ID: "s"})
			return err
		}(), ReasonInvalidSource},
	} {
		var re *RejectError
		require.ErrorAs(t, c.err, &re)
		require.Equal(t, c.reason, re.Reason, re.Detail)
	}
}

func TestValidateAccountFollowsTheEnvelopesRule(t *testing.T) {
	for account, ok := range map[string]bool{
		"acct-42": true, "a.b c*": true, "ünï": true, strings.Repeat("a", 128): true,
		"": false, strings.Repeat("a", 129): false, "a\u0007b": false, "a\u0085": false, "\xff": false,
	} {
		err := ValidateAccount(account)
		require.Equal(t, ok, err == nil, "%q: %v", account, err)
		if !ok {
			var rej *RejectError
			require.ErrorAs(t, err, &rej)
			require.Equal(t, ReasonInvalidAccount, rej.Reason)
		}
	}
}

// WithSchedule sets the times as ParseEnvelope reads them: the canonical form parses back to
// the same envelope, the key does not move, and the checks are the parser's.
func TestWithScheduleRoundTrips(t *testing.T) {
	e := mustEnvelope(t, `{"v":1,"account":"a","action":"post","request":{"text":"at nine"}}`)
	nb := time.Date(2026, 12, 8, 9, 0, 0, 123456789, time.FixedZone("CET", 3600))
	s, err := e.WithSchedule(nb, nb.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, e.DeliveryKey(), s.DeliveryKey())
	require.True(t, s.NotBefore.Equal(nb.Truncate(time.Microsecond)))
	back, err := ParseEnvelope(s.Canonical())
	require.NoError(t, err)
	require.True(t, back.Equal(s), "%s", s.Canonical())
	require.Contains(t, string(s.Canonical()), `"not_before":"2026-12-08T08:00:00.123456Z"`)
	_, err = e.WithSchedule(nb, nb)
	var re *RejectError
	require.ErrorAs(t, err, &re)
	require.Equal(t, ReasonInvalidTime, re.Reason)
	require.NoError(t, s.CheckSchedule(nb.Add(-MaxScheduleAhead)))
	require.ErrorAs(t, s.CheckSchedule(nb.Add(-MaxScheduleAhead-time.Second)), &re)
}
