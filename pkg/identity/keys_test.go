package identity

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// textID is what every identity type offers; the tests below run once per type.
type textID interface {
	String() string
	Bytes() []byte
	IsZero() bool
	MarshalText() ([]byte, error)
}

type idType struct {
	name      string
	prefix    string
	size      int
	parse     func(string) (textID, error)
	fromBytes func([]byte) (textID, error)
	unmarshal func([]byte) (textID, error)
}

func wrap[T textID](f func(string) (T, error)) func(string) (textID, error) {
	return func(s string) (textID, error) { return f(s) }
}

func wrapBytes[T textID](f func([]byte) (T, error)) func([]byte) (textID, error) {
	return func(b []byte) (textID, error) { return f(b) }
}

func wrapUnmarshal[T any, P interface {
	*T
	textID
	UnmarshalText([]byte) error
}]() func([]byte) (textID, error) {
	return func(b []byte) (textID, error) {
		var v T
		err := P(&v).UnmarshalText(b)
		return P(&v), err
	}
}

var idTypes = []idType{
	{"SourceVersion", "sv1:", 32, wrap(ParseSourceVersion), wrapBytes(SourceVersionFromBytes), wrapUnmarshal[SourceVersion]()},
	{"ClaimID", "cl1:", 32, wrap(ParseClaimID), wrapBytes(ClaimIDFromBytes), wrapUnmarshal[ClaimID]()},
	{"DeliveryKey", "dk1:", 32, wrap(ParseDeliveryKey), wrapBytes(DeliveryKeyFromBytes), wrapUnmarshal[DeliveryKey]()},
	{"TextHash", "th1:", 32, wrap(ParseTextHash), wrapBytes(TextHashFromBytes), wrapUnmarshal[TextHash]()},
	{"RawHash", "raw1:", 32, wrap(ParseRawHash), wrapBytes(RawHashFromBytes), wrapUnmarshal[RawHash]()},
	{"AttemptToken", "at1:", 16, wrap(ParseAttemptToken), wrapBytes(AttemptTokenFromBytes), wrapUnmarshal[AttemptToken]()},
}

func TestIdentityTextFormsRoundTrip(t *testing.T) {
	for _, typ := range idTypes {
		t.Run(typ.name, func(t *testing.T) {
			raw := make([]byte, typ.size)
			for i := range raw {
				raw[i] = byte(i*37 + 5)
			}
			id, err := typ.fromBytes(raw)
			require.NoError(t, err)
			require.Equal(t, raw, id.Bytes())
			require.False(t, id.IsZero())
			s := id.String()
			require.True(t, strings.HasPrefix(s, typ.prefix))
			require.Len(t, s, len(typ.prefix)+2*typ.size)
			require.Equal(t, strings.ToLower(s), s)

			parsed, err := typ.parse(s)
			require.NoError(t, err)
			require.Equal(t, id, parsed)
			text, err := id.MarshalText()
			require.NoError(t, err)
			require.Equal(t, s, string(text))
			un, err := typ.unmarshal(text)
			require.NoError(t, err)
			require.Equal(t, s, un.String())

			zero, err := typ.fromBytes(make([]byte, typ.size))
			require.NoError(t, err)
			require.True(t, zero.IsZero())
			zeroAgain, err := typ.parse(zero.String())
			require.NoError(t, err)
			require.True(t, zeroAgain.IsZero(), "the zero value round-trips")

			b := id.Bytes()
			b[0] ^= 0xff
			require.Equal(t, raw, id.Bytes(), "Bytes returns a copy")
		})
	}
}

func TestParseIdentityRejectsMalformedText(t *testing.T) {
	for _, typ := range idTypes {
		t.Run(typ.name, func(t *testing.T) {
			good := typ.prefix + strings.Repeat("0123456789abcdef", typ.size/8)
			_, err := typ.parse(good)
			require.NoError(t, err)
			other := "dk1:"
			if typ.prefix == other {
				other = "sv1:"
			}
			bad := map[string]string{
				"empty":                      "",
				"prefix only":                typ.prefix,
				"no prefix":                  strings.TrimPrefix(good, typ.prefix),
				"other prefix":               other + strings.TrimPrefix(good, typ.prefix),
				"upper-case digit":           strings.ToUpper(good[:len(good)-1]) + "A",
				"upper-case only at the end": good[:len(good)-1] + "F",
				"upper-case prefix":          strings.ToUpper(typ.prefix) + strings.TrimPrefix(good, typ.prefix),
				"non-hex digit":              good[:len(good)-1] + "g",
				"too short":                  good[:len(good)-2],
				"too long":                   good + "00",
				"odd length":                 good[:len(good)-1],
				"white space":                " " + good,
				"trailing newline":           good + "\n",
				"non-ASCII digit":            good[:len(good)-2] + "\u00e9",
			}
			for name, s := range bad {
				_, err := typ.parse(s)
				require.ErrorIs(t, err, ErrMalformedIdentity, name)
				_, err = typ.unmarshal([]byte(s))
				require.ErrorIs(t, err, ErrMalformedIdentity, name)
			}
			for _, n := range []int{0, typ.size - 1, typ.size + 1} {
				_, err := typ.fromBytes(make([]byte, n))
				require.ErrorIs(t, err, ErrMalformedIdentity, "%d bytes", n)
			}
		})
	}
}

func TestParseErrorDoesNotEchoLongInput(t *testing.T) {
	_, err := ParseDeliveryKey(strings.Repeat("x", 100000))
	require.Error(t, err)
	require.Less(t, len(err.Error()), 200)
}

func TestIdentitiesWorkAsJSONTextValues(t *testing.T) {
	env := mustEnvelope(t, `{"v":1,"account":"a","action":"like","target":"t","request":{}}`)
	type row struct {
		Key DeliveryKey `json:"key"`
	}
	b, err := json.Marshal(row{env.DeliveryKey()})
	require.NoError(t, err)
	require.Equal(t, `{"key":"`+env.DeliveryKey().String()+`"}`, string(b))
	var back row
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, env.DeliveryKey(), back.Key)
	require.Error(t, json.Unmarshal([]byte(`{"key":"dk1:00"}`), &back))
}

func field(b []byte) []byte {
	return append(binary.BigEndian.AppendUint64(nil, uint64(len(b))), b...)
}

func layoutHash(fields ...string) [32]byte {
	var msg []byte
	for _, f := range fields {
		msg = append(msg, field([]byte(f))...)
	}
	return sha256.Sum256(msg)
}

// TestHashLayoutMatchesPackageDocumentation pins the byte layout written in
// doc.go, which a SQL implementation reproduces.
func TestHashLayoutMatchesPackageDocumentation(t *testing.T) {
	env := mustEnvelope(t, `{"v":1,"account":"acct-42","action":"post","target":"","request":{"text":" Hello "},"occurrence":"2"}`)
	want := layoutHash("atmost/delivery-key/v1", "acct-42", "post", "", `{"text":"Hello"}`, "2")
	require.Equal(t, want[:], env.DeliveryKey().Bytes())

	th := layoutHash("atmost/text/v1", "Hello")
	require.Equal(t, th[:], NewTextHash("Hello\r\n").Bytes())

	sv, _, err := NewSourceVersion("HTTPS://Example.org", "a  b")
	require.NoError(t, err)
	want = layoutHash("atmost/source-version/v1", "https://example.org/", "a b")
	require.Equal(t, want[:], sv.Bytes())

	claim, err := NewClaimID(sv, " It rained. ")
	require.NoError(t, err)
	want = layoutHash("atmost/claim/v1", string(sv.Bytes()), "It rained.")
	require.Equal(t, want[:], claim.Bytes())
}

func TestClaimIDRestsOnItsSourceVersion(t *testing.T) {
	v1, _, err := NewSourceVersion("https://example.org/a", "one")
	require.NoError(t, err)
	v2, _, err := NewSourceVersion("https://example.org/a", "two")
	require.NoError(t, err)
	c1, err := NewClaimID(v1, "It rained.")
	require.NoError(t, err)
	c2, err := NewClaimID(v2, "It rained.")
	require.NoError(t, err)
	require.NotEqual(t, c1, c2, "the same sentence on two versions is two claims")
	c1b, err := NewClaimID(v1, "It rained.\r\n")
	require.NoError(t, err)
	require.Equal(t, c1, c1b, "claim content is normalized")

	_, err = NewClaimID(SourceVersion{}, "x")
	require.ErrorIs(t, err, ErrZeroSourceVersion)
	_, err = NewClaimID(v1, " \n ")
	require.ErrorIs(t, err, ErrEmptyClaim)
}

func TestTextHashFollowsSameText(t *testing.T) {
	require.Equal(t, NewTextHash("Caf\u00e9\n"), NewTextHash(" Cafe\u0301"))
	require.NotEqual(t, NewTextHash("a b"), NewTextHash("a  b"))
	require.NotEqual(t, NewTextHash(""), TextHash{})
}

func TestIdentityDomainsAreSeparate(t *testing.T) {
	// The same text under two domains never yields the same bytes.
	th := NewTextHash("x")
	sv, _, err := NewSourceVersion("x", "x")
	require.NoError(t, err)
	require.NotEqual(t, th.Bytes(), sv.Bytes())
	require.NotEqual(t, NewRawHash([]byte("x")).Bytes(), th.Bytes())
}

func TestAttemptTokensAreRandomAndDistinct(t *testing.T) {
	seen := map[AttemptToken]bool{}
	for range 10000 {
		tok, err := NewAttemptToken()
		require.NoError(t, err)
		require.False(t, tok.IsZero())
		require.False(t, seen[tok])
		seen[tok] = true
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("entropy exhausted") }

func TestAttemptTokenReportsRandomSourceFailure(t *testing.T) {
	tok, err := attemptTokenFrom(failingReader{})
	require.ErrorIs(t, err, ErrRandomSource)
	require.True(t, tok.IsZero())
}

func TestAppendTextWritesTheTextForm(t *testing.T) {
	key, err := DeliveryKeyFromBytes(append([]byte{1, 2, 3, 0xfe, 0xff}, make([]byte, 27)...))
	require.NoError(t, err)
	token, err := NewAttemptToken()
	require.NoError(t, err)
	for _, c := range []struct {
		id interface {
			String() string
			AppendText([]byte) ([]byte, error)
		}
	}{{key}, {token}} {
		got, err := c.id.AppendText([]byte("before|"))
		require.NoError(t, err)
		require.Equal(t, "before|"+c.id.String(), string(got))
	}
	require.Equal(t, "x"+strings.TrimPrefix(key.String(), "dk1:"), string(key.AppendHex([]byte("x"))))
}
