package identity

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/atmost/atmost/pkg/identity/canonicaljson"
	"github.com/stretchr/testify/require"
)

func mustNew(t testing.TB, account, action, target, request, occurrence string, source *Source) Envelope {
	t.Helper()
	e, err := NewEnvelope(account, action, target, []byte(request), occurrence, source)
	require.NoError(t, err)
	return e
}

func TestEveryActionKindHasADistinctKeyOnTheSameTarget(t *testing.T) {
	actions := []string{"post", "reply", "quote", "like", "unlike", "repost", "follow", "subscribe", "ack", "webhook", "a", "a_1"}
	for _, request := range []string{`{}`, `{"text":"same"}`} {
		seen := map[DeliveryKey]string{}
		for _, action := range actions {
			k := mustNew(t, "acct", action, "at://post/1", request, "", nil).DeliveryKey()
			prev, dup := seen[k]
			require.False(t, dup, "%s and %s share a key", prev, action)
			seen[k] = action
		}
	}
}

// randomProjection returns valid field values drawn from small alphabets, so
// that collisions between distinct projections would be likely if the
// encoding were ambiguous.
func randomField(r *rand.Rand, alphabet string, maxLen int) string {
	var b strings.Builder
	for range r.IntN(maxLen + 1) {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

type projection struct {
	account, action, target, occurrence string
	request                             map[string]string
}

func (p projection) requestJSON() string {
	var b []byte
	b = append(b, '{')
	first := true
	for k, v := range p.request {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = canonicaljson.AppendString(b, k)
		b = append(b, ':')
		b = canonicaljson.AppendString(b, v)
	}
	return string(append(b, '}'))
}

func randomProjectionValue(r *rand.Rand) projection {
	p := projection{
		account:    "a" + randomField(r, "ab.", 3),
		action:     "p" + randomField(r, "ab_", 3),
		target:     randomField(r, "ab ", 3),
		occurrence: randomField(r, "ab", 2),
		request:    map[string]string{},
	}
	for range r.IntN(3) {
		p.request[randomField(r, "ab", 2)] = randomField(r, "ab", 2)
	}
	return p
}

func TestAnyProjectionChangeChangesTheKey(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	canonicalOf := map[DeliveryKey]string{}
	for range 20000 {
		p := randomProjectionValue(r)
		e := mustNew(t, p.account, p.action, p.target, p.requestJSON(), p.occurrence, nil)
		// Distinct projections must have distinct keys, equal ones equal keys.
		id := strconv.Quote(e.Account) + strconv.Quote(e.Action) + strconv.Quote(e.Target) + string(e.Request) + strconv.Quote(e.Occurrence)
		if prev, ok := canonicalOf[e.DeliveryKey()]; ok {
			require.Equal(t, prev, id, "two projections share a key")
		}
		canonicalOf[e.DeliveryKey()] = id
	}
	require.Greater(t, len(canonicalOf), 5000, "the generator must produce many distinct projections")

	// And a directed check: each single-field change changes the key.
	base := mustNew(t, "acct", "quote", "t", `{"text":"hi","link":"x"}`, "1", nil).DeliveryKey()
	changed := []Envelope{
		mustNew(t, "acct2", "quote", "t", `{"text":"hi","link":"x"}`, "1", nil),
		mustNew(t, "acct", "post", "t", `{"text":"hi","link":"x"}`, "1", nil),
		mustNew(t, "acct", "quote", "t2", `{"text":"hi","link":"x"}`, "1", nil),
		mustNew(t, "acct", "quote", "", `{"text":"hi","link":"x"}`, "1", nil),
		mustNew(t, "acct", "quote", "t", `{"text":"hi!","link":"x"}`, "1", nil),
		mustNew(t, "acct", "quote", "t", `{"text":"hi","link":"y"}`, "1", nil),
		mustNew(t, "acct", "quote", "t", `{"text":"hi"}`, "1", nil),
		mustNew(t, "acct", "quote", "t", `{"text":"hi","link":"x","extra":null}`, "1", nil),
		mustNew(t, "acct", "quote", "t", `{"text":"hi","link":["x"]}`, "1", nil),
		mustNew(t, "acct", "quote", "t", `{"text":"hi","link":"x"}`, "2", nil),
		mustNew(t, "acct", "quote", "t", `{"text":"hi","link":"x"}`, "", nil),
		mustNew(t, "acct", "quote", "t", `{"text":"Hi","link":"x"}`, "1", nil),
		mustNew(t, "acct", "quote", "t", `{"text":"h i","link":"x"}`, "1", nil),
	}
	for _, e := range changed {
		require.NotEqual(t, base, e.DeliveryKey(), "%s", e.Canonical())
	}
}

func TestFieldBoundariesAreUnambiguous(t *testing.T) {
	a := mustNew(t, "ab", "c", "", `{}`, "", nil).DeliveryKey()
	b := mustNew(t, "a", "bc", "", `{}`, "", nil).DeliveryKey()
	c := mustNew(t, "a", "b", "c", `{}`, "", nil).DeliveryKey()
	d := mustNew(t, "a", "b", "", `{}`, "c", nil).DeliveryKey()
	require.Len(t, map[DeliveryKey]bool{a: true, b: true, c: true, d: true}, 4)
}

func TestSpellingDifferencesDoNotChangeTheKey(t *testing.T) {
	src1 := `"source":{"id":"https://example.org/a","version":"` + validVersion + `"}`
	src2 := `"source":{"id":"https://example.org/b","version":"sv1:` + strings.Repeat("1", 64) + `"}`
	base := mustEnvelope(t, `{"v":1,"account":"acct","action":"quote","target":"t","occurrence":"1",
	  "request":{"text":"Café\nbar","link":{"uri":"x","cid":"y"},"n":1}}`)
	variants := []string{
		// member order, at both levels
		`{"occurrence":"1","request":{"n":1,"link":{"cid":"y","uri":"x"},"text":"Café\nbar"},"target":"t","action":"quote","account":"acct","v":1}`,
		// white space everywhere
		"{ \"v\" : 1 ,\n\t\"account\" : \"acct\" , \"action\":\"quote\",\"target\":\"t\",\"occurrence\":\"1\",\r\n \"request\" : { \"text\" : \"Café\\nbar\" , \"link\" : { \"uri\" : \"x\" , \"cid\" : \"y\" } , \"n\" : 1 } }",
		// number spelling
		`{"v":1.0,"account":"acct","action":"quote","target":"t","occurrence":"1","request":{"text":"Café\nbar","link":{"uri":"x","cid":"y"},"n":1.0}}`,
		`{"v":1e0,"account":"acct","action":"quote","target":"t","occurrence":"1","request":{"text":"Café\nbar","link":{"uri":"x","cid":"y"},"n":10E-1}}`,
		// string escapes
		`{"v":1,"account":"\u0061cct","action":"quote","target":"t","occurrence":"1","request":{"text":"Caf\u00e9\nbar","link":{"uri":"\u0078","cid":"y"},"n":1}}`,
		// CRLF, lone CR, NFD, surrounding white space in the text
		`{"v":1,"account":"acct","action":"quote","target":"t","occurrence":"1","request":{"text":"Café\r\nbar","link":{"uri":"x","cid":"y"},"n":1}}`,
		`{"v":1,"account":"acct","action":"quote","target":"t","occurrence":"1","request":{"text":"Café\rbar","link":{"uri":"x","cid":"y"},"n":1}}`,
		`{"v":1,"account":"acct","action":"quote","target":"t","occurrence":"1","request":{"text":"Cafe\u0301\nbar","link":{"uri":"x","cid":"y"},"n":1}}`,
		`{"v":1,"account":"acct","action":"quote","target":"t","occurrence":"1","request":{"text":" \n Café\nbar\u00a0\n","link":{"uri":"x","cid":"y"},"n":1}}`,
		// fields outside the projection
		`{"v":1,"account":"acct","action":"quote","target":"t","occurrence":"1","request":{"text":"Café\nbar","link":{"uri":"x","cid":"y"},"n":1},` + src1 + `}`,
		`{"v":1,"account":"acct","action":"quote","target":"t","occurrence":"1","request":{"text":"Café\nbar","link":{"uri":"x","cid":"y"},"n":1},` + src2 + `}`,
	}
	for _, v := range variants {
		e := mustEnvelope(t, v)
		require.Equal(t, base.DeliveryKey(), e.DeliveryKey(), v)
		require.Equal(t, base.Request, e.Request, v)
	}
	// Absent and empty target/occurrence are the same projection.
	require.Equal(t,
		mustEnvelope(t, `{"v":1,"account":"a","action":"like","request":{}}`).DeliveryKey(),
		mustEnvelope(t, `{"v":1,"account":"a","action":"like","target":"","occurrence":"","request":{}}`).DeliveryKey())
}

func TestRandomRespellingsKeepTheKey(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		p := randomProjectionValue(r)
		text := randomField(r, "ab \n", 6)
		p.request["text"] = text
		base := mustNew(t, p.account, p.action, p.target, p.requestJSON(), p.occurrence, nil)
		// Respell: CRLF line ends, NFD accents, padding and re-ordered members.
		p.request["text"] = " \t" + strings.ReplaceAll(text, "\n", "\r\n") + "\r\n"
		respelt := mustNew(t, p.account, p.action, p.target, " "+p.requestJSON()+"\n", p.occurrence, nil)
		require.Equal(t, base.DeliveryKey(), respelt.DeliveryKey())
	}
}

func TestPlainAccountsAreTheirOwnTokens(t *testing.T) {
	for _, a := range []string{"acct-42", "A", "a_b-C9", strings.Repeat("x", 128)} {
		require.Equal(t, a, AccountToken(a))
		back, err := ParseAccountToken(a)
		require.NoError(t, err)
		require.Equal(t, a, back)
	}
}

func TestEscapedAccountTokens(t *testing.T) {
	cases := map[string]string{
		"":          "~",
		"a.b":       "~YS5i",
		"a b":       "~YSBi",
		"*":         "~Kg",
		">":         "~Pg",
		"~x":        "~fng",
		"café":      "~Y2Fmw6k",
		"\xff":      "~_w",
		"user@host": "~dXNlckBob3N0",
	}
	for account, token := range cases {
		require.Equal(t, token, AccountToken(account), "%q", account)
		back, err := ParseAccountToken(token)
		require.NoError(t, err)
		require.Equal(t, account, back)
	}
}

func TestParseAccountTokenRefusesTokensAccountTokenCannotProduce(t *testing.T) {
	for _, tok := range []string{
		"",      // empty
		"a.b",   // plain with a forbidden byte
		"a b",   // white space
		"~YWJj", // escaped form of the plain account "abc"
		"~YQ==", // padding
		"~YR",   // non-canonical trailing bits
		"~Y",    // impossible length
		"~a+b",  // standard, not URL, alphabet
		"x~YQ",  // escape not at the start
		"~~",    // escape inside
	} {
		_, err := ParseAccountToken(tok)
		require.ErrorIs(t, err, ErrInvalidAccountToken, "%q", tok)
	}
}

func validSubjectToken(tok string) bool {
	if tok == "" || !utf8.ValidString(tok) {
		return false
	}
	for _, r := range tok {
		if r == '.' || r == '*' || r == '>' || unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

func TestAccountTokenIsInjectiveAndAlwaysAValidSubjectToken(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	pieces := []string{"a", "Z", "0", "_", "-", ".", "*", ">", " ", "\t", "\n", "~", "é", "\u2028", "\x00", "\xff", "\xc3", "YQ", "=", "+", "/"}
	tokens := map[string]string{}
	for range 50000 {
		var b strings.Builder
		for range r.IntN(6) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		account := b.String()
		tok := AccountToken(account)
		require.True(t, validSubjectToken(tok), "%q -> %q", account, tok)
		if prev, ok := tokens[tok]; ok {
			require.Equal(t, prev, account, "two accounts share token %q", tok)
		}
		tokens[tok] = account
		back, err := ParseAccountToken(tok)
		require.NoError(t, err)
		require.Equal(t, account, back)
	}
	require.Greater(t, len(tokens), 10000)
}
