package identity

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
)

// envelopeSchemaPath is the published JSON Schema of the envelope, beside this package's code.
const envelopeSchemaPath = "envelope.schema.json"

// producersDoc is the producers' manual, which lists the rules the schema cannot say.
const producersDoc = "../../docs/producers.md"

// The rules of ParseEnvelope that a JSON Schema cannot express, by the name docs/producers.md
// gives each under "What the schema cannot say". A schema validates a decoded document: it
// never sees the bytes, the spelling of a number, a repeated member name or the nesting, and it
// measures strings in characters, not bytes.
const (
	ruleUTF8        = "UTF-8"
	ruleSize        = "Size"
	ruleDuplicates  = "Duplicate names"
	ruleNumbers     = "Exact numbers"
	ruleDepth       = "Nesting"
	ruleByteLengths = "Lengths in bytes"
	ruleSourceID    = "The canonical source id"
	ruleTimes       = "Times"
)

// parserOnly names the fixtures (identity vectors, envelopeRejectCases and the cases below)
// that the schema accepts and the parser refuses, with the rule each breaks. Every other
// fixture is accepted by both or refused by both.
var parserOnly = map[string]string{
	"duplicate field in request":                 ruleDuplicates,
	"duplicate account in a whole envelope":      ruleDuplicates,
	"lone surrogate escape":                      ruleUTF8,
	"lone surrogate in the request":              ruleUTF8,
	"inexact number in request":                  ruleNumbers,
	"2^53+1 in the request":                      ruleNumbers,
	"lone low surrogate in text":                 ruleUTF8,
	"surrogate bytes in text":                    ruleUTF8,
	"number beyond float64 in the request":       ruleNumbers,
	"request nested too deep":                    ruleDepth,
	"over 64 KiB":                                ruleSize,
	"canonical form over 64 KiB":                 ruleSize,
	"account of 65 two-byte characters":          ruleByteLengths,
	"target of 513 two-byte characters":          ruleByteLengths,
	"occurrence of 65 two-byte characters":       ruleByteLengths,
	"empty source id":                            ruleSourceID,
	"source id with control":                     ruleSourceID,
	"source id too long":                         ruleSourceID,
	"source id too long once its space is kept":  ruleSourceID,
	"source id with control before its fragment": ruleSourceID,
	"expires_at not after not_before":            ruleTimes,
	"not_before before 2000":                     ruleTimes,
}

// schemaCases are fixtures of this test's own: one or more for each rule the schema cannot say
// that no other fixture shows, and accepted envelopes at the edges where the schema must not be
// stricter than the parser.
func schemaCases() []struct{ name, in string } {
	two := "é" // two bytes of UTF-8, one character
	return []struct{ name, in string }{
		{"duplicate account in a whole envelope", `{"v":1,"account":"a","account":"b","action":"post","request":{}}`},
		{"lone surrogate in the request", `{"v":1,"account":"a","action":"post","request":{"text":"\udc00"}}`},
		{"number beyond float64 in the request", `{"v":1,"account":"a","action":"post","request":{"n":1e400}}`},
		{"account of 65 two-byte characters", `{"v":1,"account":"` + strings.Repeat(two, 65) + `","action":"post","request":{}}`},
		{"target of 513 two-byte characters", `{"v":1,"account":"a","action":"like","target":"` + strings.Repeat(two, 513) + `","request":{}}`},
		{"occurrence of 65 two-byte characters", `{"v":1,"account":"a","action":"post","occurrence":"` + strings.Repeat(two, 65) + `","request":{}}`},
		{"source id too long once its space is kept", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"` + strings.Repeat("s", 2048) + ` s","version":"` + validVersion + `"}}`},
		// Accepted by both.
		{"account of 64 two-byte characters", `{"v":1,"account":"` + strings.Repeat(two, 64) + `","action":"post","request":{}}`},
		{"account of 128 bytes", `{"v":1,"account":"` + strings.Repeat("a", 128) + `","action":"post","request":{}}`},
		{"version spelt 1.0 and 1e0", `{"v":1e0,"account":"a","action":"post","request":{"n":1.0}}`},
		{"source id with a control character in its fragment", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"https://example.org/a#\u0001","version":"` + validVersion + `"}}`},
		{"source id of 2048 bytes inside white space", `{"v":1,"account":"a","action":"post","request":{},"source":{"id":"\t` + strings.Repeat("s", 2048) + ` ","version":"` + validVersion + `"}}`},
		{"a request of every JSON type", `{"v":1,"account":"a","action":"post","request":{"a":[1,-2.5,"x",true,false,null,{}],"text":" hi\r\n"}}`},
	}
}

func compileEnvelopeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(envelopeSchemaPath)
	require.NoError(t, err)
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource(envelopeSchemaPath, doc))
	s, err := c.Compile(envelopeSchemaPath)
	require.NoError(t, err)
	return s
}

// schemaAccepts reports whether in is one JSON document that the schema validates.
func schemaAccepts(s *jsonschema.Schema, in []byte) bool {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(in))
	return err == nil && s.Validate(doc) == nil
}

// The published schema and the parser agree on every identity vector and every reject fixture:
// each is accepted by both or refused by both, except a fixture that breaks one of the rules
// the schema cannot say, which the parser alone refuses. Each such rule has a fixture, and the
// list is the one docs/producers.md gives.
func TestTheEnvelopeSchemaAgreesWithTheParser(t *testing.T) {
	schema := compileEnvelopeSchema(t)
	type fixture struct {
		name string
		in   []byte
	}
	var fixtures []fixture
	raw, err := os.ReadFile(vectorsPath)
	require.NoError(t, err)
	var vectors []vector
	require.NoError(t, json.Unmarshal(raw, &vectors))
	for _, v := range vectors {
		switch v.Kind {
		case "delivery_key", "key_header", "envelope_rejection":
			fixtures = append(fixtures, fixture{v.Kind + ": " + v.Name, bytesOf(t, v.Envelope, v.EnvelopeHex)})
		}
	}
	for _, c := range envelopeRejectCases() {
		fixtures = append(fixtures, fixture{"reject case: " + c.name, []byte(c.in)})
	}
	for _, c := range schemaCases() {
		fixtures = append(fixtures, fixture{"schema case: " + c.name, []byte(c.in)})
	}

	shown := map[string]bool{}
	accepted, refused := 0, 0
	for _, f := range fixtures {
		_, name, _ := strings.Cut(f.name, ": ")
		env, perr := ParseEnvelope(f.in)
		parser, schemaOK := perr == nil, schemaAccepts(schema, f.in)
		if rule, ok := parserOnly[name]; ok {
			require.False(t, parser, "%s: the parser accepts it", f.name)
			require.True(t, schemaOK, "%s: the schema refuses it, so %q is no longer a rule it cannot say", f.name, rule)
			shown[rule] = true
			continue
		}
		require.Equal(t, parser, schemaOK, "%s: parser accepts %t (%v), schema accepts %t", f.name, parser, perr, schemaOK)
		if parser {
			accepted++
			require.True(t, schemaAccepts(schema, env.Canonical()), "%s: its canonical form validates", f.name)
		} else {
			refused++
		}
	}
	require.Positive(t, accepted)
	require.Positive(t, refused)

	rules := []string{ruleUTF8, ruleSize, ruleDuplicates, ruleNumbers, ruleDepth, ruleByteLengths, ruleSourceID, ruleTimes}
	for _, r := range rules {
		require.True(t, shown[r], "no fixture shows the rule %q in the parser alone", r)
	}
	sort.Strings(rules)
	require.Equal(t, rules, documentedParserOnlyRules(t), "docs/producers.md lists the rules the schema cannot say")
}

// documentedParserOnlyRules returns the bold names of the bullets under the heading "What the
// schema cannot say" of docs/producers.md, sorted.
func documentedParserOnlyRules(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(producersDoc)
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(b), "\n### What the schema cannot say\n")
	require.True(t, ok, "docs/producers.md has no section \"What the schema cannot say\"")
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^- \*\*([^*]+?)\.\*\*`).FindAllStringSubmatch(section, -1) {
		names = append(names, m[1])
	}
	sort.Strings(names)
	return names
}
