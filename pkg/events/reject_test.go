package events_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
)

func compileRejectSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("reject.schema.json")
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.AssertContent()
	require.NoError(t, c.AddResource("reject.schema.json", doc))
	schema, err := c.Compile("reject.schema.json")
	require.NoError(t, err)
	return schema
}

func sampleRejects(t *testing.T) []events.Reject {
	t.Helper()
	body := []byte(`{"v":1,"account":"acct-2","action":"post","request":{"text":"hi"}}`)
	sum := sha256.Sum256(body)
	k := key(t, "hi")
	mismatch := events.Reject{V: 1, ID: events.RejectID(events.IntentsStream, 42), Reason: identity.ReasonSubjectMismatch,
		Detail: `account "acct-2" is published on atmost.intent.acct-2; this message came on "atmost.intent.acct-1"`,
		Stream: events.IntentsStream, StreamSeq: 42, Subject: "atmost.intent.acct-1", MsgID: "producer-7",
		Account: "acct-2", DeliveryKey: &k, Size: len(body), SHA256: hex.EncodeToString(sum[:]), Raw: body}
	malformed := events.Reject{V: 1, ID: events.RejectID(events.IntentsStream, 43), Reason: identity.ReasonMalformedJSON,
		Detail: "unexpected end of input", Stream: events.IntentsStream, StreamSeq: 43, Subject: "atmost.intent.acct-1",
		Size: 3, SHA256: hex.EncodeToString(sum[:]), Raw: []byte("{\"v"), Truncated: false}
	unstorable := events.Reject{V: 1, ID: events.RejectID(events.IntentsStream, 44), Reason: identity.ReasonUnstorable,
		Detail: "refused", Stream: events.IntentsStream, StreamSeq: 44, Subject: "base64:AP8=", Size: 10,
		SHA256: hex.EncodeToString(sum[:]), Truncated: true}
	return []events.Reject{mismatch, malformed, unstorable}
}

func TestRejectsRoundTripAndMatchThePublishedSchema(t *testing.T) {
	schema := compileRejectSchema(t)
	for _, r := range sampleRejects(t) {
		payload, err := r.Marshal()
		require.NoError(t, err)
		var doc any
		require.NoError(t, json.Unmarshal(payload, &doc))
		require.NoError(t, schema.Validate(doc), string(payload))
		back, err := events.UnmarshalReject(payload)
		require.NoError(t, err)
		if r.Raw == nil {
			r.Raw = []byte{}
		}
		require.Equal(t, r, back)
	}
}

// The schema must refuse what the type refuses, or it documents nothing; the rules it cannot
// state are the type's alone, and named.
func TestRejectSchemaAndTypeRefuseMalformedRejects(t *testing.T) {
	schema := compileRejectSchema(t)
	good, err := sampleRejects(t)[0].Marshal()
	require.NoError(t, err)
	crossField := map[string]bool{"id of another seq": true, "raw longer than size": true, "truncated when whole": true}
	for name, mutate := range map[string]func(m map[string]any){
		"unknown reason":       func(m map[string]any) { m["reason"] = "too_bad" },
		"unknown field":        func(m map[string]any) { m["extra"] = 1 },
		"wrong version":        func(m map[string]any) { m["v"] = 2 },
		"msg_id a number":      func(m map[string]any) { m["msg_id"] = 7 },
		"missing stream_seq":   func(m map[string]any) { delete(m, "stream_seq") },
		"zero stream_seq":      func(m map[string]any) { m["stream_seq"] = 0; m["id"] = "reject:ATMOST_INTENTS:0" },
		"account without key":  func(m map[string]any) { delete(m, "delivery_key") },
		"key without account":  func(m map[string]any) { delete(m, "account") },
		"bad key":              func(m map[string]any) { m["delivery_key"] = "dk1:xyz" },
		"bad sha256":           func(m map[string]any) { m["sha256"] = "ABC" },
		"raw not base64":       func(m map[string]any) { m["raw"] = "not base64!" },
		"id of another seq":    func(m map[string]any) { m["stream_seq"] = 41 },
		"raw longer than size": func(m map[string]any) { m["size"] = 1; m["truncated"] = false },
		"truncated when whole": func(m map[string]any) { m["truncated"] = true },
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(good, &m))
		mutate(m)
		bad, err := json.Marshal(m)
		require.NoError(t, err)
		_, err = events.UnmarshalReject(bad)
		require.Error(t, err, "type accepts %s", name)
		if crossField[name] {
			require.NoError(t, schema.Validate(m), "%s is a cross-field rule the schema cannot state; the type holds it", name)
		} else {
			require.Error(t, schema.Validate(m), "schema accepts %s", name)
		}
	}
}

// The schema's reasons are identity.AllReasons, in order: a reason added to one is added to
// the other.
func TestTheRejectSchemaListsEveryReason(t *testing.T) {
	b, err := os.ReadFile("reject.schema.json")
	require.NoError(t, err)
	var doc struct {
		Properties struct {
			Reason struct {
				Enum []identity.Reason `json:"enum"`
			} `json:"reason"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(b, &doc))
	require.Equal(t, identity.AllReasons(), doc.Properties.Reason.Enum)
	require.True(t, slices.Contains(doc.Properties.Reason.Enum, identity.ReasonSubjectMismatch))
}

// The reject docs/producers.md shows is one: it validates against the schema, parses, and its
// key and digest are those of the body it carries.
func TestTheProducersDocsRejectExampleIsAReject(t *testing.T) {
	b, err := os.ReadFile("../../docs/producers.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(b), "<!-- reject-example:start -->\n```json\n")
	require.True(t, ok, "docs/producers.md has no reject example")
	example, _, ok := strings.Cut(rest, "```\n<!-- reject-example:end -->")
	require.True(t, ok)
	var doc any
	require.NoError(t, json.Unmarshal([]byte(example), &doc))
	require.NoError(t, compileRejectSchema(t).Validate(doc))
	r, err := events.UnmarshalReject([]byte(example))
	require.NoError(t, err)
	sum := sha256.Sum256(r.Raw)
	require.Equal(t, hex.EncodeToString(sum[:]), r.SHA256)
	env, err := identity.ParseEnvelope(r.Raw)
	require.NoError(t, err)
	require.Equal(t, env.DeliveryKey(), *r.DeliveryKey)
	require.Equal(t, env.Account, r.Account)
	require.Equal(t, events.IntentSubject(r.Account) != r.Subject, r.Reason == identity.ReasonSubjectMismatch)
}
