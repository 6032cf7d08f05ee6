package identity

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// vectorsPath is the shared vector file at the repository root. Every other
// implementation of these rules (the ledger's SQL, any in-memory store) is
// driven by the same file, so Go and SQL cannot drift apart. The values were
// generated once and checked by hand; they are never regenerated: a change
// that breaks them changes what existing keys mean.
//
// The file is an array of cases, each with a "kind" and a "name":
//
//	delivery_key              envelope -> delivery_key, canonical_request,
//	                          canonical_envelope, text_hash (or null), account_token
//	key_header                envelope + header -> reason (or null)
//	envelope_rejection        envelope | envelope_hex -> reason
//	source_version            source_id | source_id_hex + body | body_hex ->
//	                          canonical_source_id, normalized_body,
//	                          source_version, raw_hash
//	source_version_rejection  source_id | source_id_hex + body -> error
//	claim                     source_version + content -> claim_id
//	text_hash                 text | text_hex -> normalized, text_hash
//	canonical_json            input -> output
//	canonical_json_rejection  input | input_hex (+ object_required) -> error
//	account_token             account | account_hex -> token
//
// A *_hex field carries bytes that are not valid UTF-8 and so cannot be a JSON
// string.
const vectorsPath = "../../testdata/identity-vectors.json"

type vector struct {
	Kind string `json:"kind"`
	Name string `json:"name"`

	Envelope    *string `json:"envelope"`
	EnvelopeHex *string `json:"envelope_hex"`
	Header      *string `json:"header"`
	SourceID    *string `json:"source_id"`
	SourceIDHex *string `json:"source_id_hex"`
	Body        *string `json:"body"`
	BodyHex     *string `json:"body_hex"`
	Version     *string `json:"source_version"`
	Content     *string `json:"content"`
	Text        *string `json:"text"`
	TextHex     *string `json:"text_hex"`
	Input       *string `json:"input"`
	InputHex    *string `json:"input_hex"`
	ObjectReq   bool    `json:"object_required"`
	Account     *string `json:"account"`
	AccountHex  *string `json:"account_hex"`

	CanonicalSourceID *string `json:"canonical_source_id"`
	NormalizedBody    *string `json:"normalized_body"`
	Normalized        *string `json:"normalized"`
	RawHash           *string `json:"raw_hash"`
	ClaimID           *string `json:"claim_id"`
	TextHash          *string `json:"text_hash"`
	DeliveryKey       *string `json:"delivery_key"`
	CanonicalRequest  *string `json:"canonical_request"`
	CanonicalEnvelope *string `json:"canonical_envelope"`
	AccountToken      *string `json:"account_token"`
	Token             *string `json:"token"`
	Output            *string `json:"output"`
	Error             *string `json:"error"`
	Reason            *string `json:"reason"`
}

// bytesOf returns the value of a plain or a *_hex field, exactly one of which
// must be set.
func bytesOf(t *testing.T, plain, hexed *string) []byte {
	t.Helper()
	require.True(t, (plain == nil) != (hexed == nil), "exactly one of the plain and _hex fields must be set")
	if plain != nil {
		return []byte(*plain)
	}
	b, err := hex.DecodeString(*hexed)
	require.NoError(t, err)
	return b
}

func req[T any](t *testing.T, p *T) T {
	t.Helper()
	require.NotNil(t, p, "a required field of the vector is missing")
	return *p
}

var jsonErrorNames = map[string]error{
	"malformed_json": ErrMalformedJSON,
	"trailing_data":  ErrTrailingData,
	"duplicate_key":  ErrDuplicateKey,
	"invalid_utf8":   ErrInvalidUTF8,
	"not_object":     ErrNotObject,
	"inexact_number": ErrInexactNumber,
	"too_deep":       ErrTooDeep,
}

func TestSharedIdentityVectorsHold(t *testing.T) {
	raw, err := os.ReadFile(vectorsPath)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var vectors []vector
	require.NoError(t, dec.Decode(&vectors))

	count := map[string]int{}
	for _, v := range vectors {
		count[v.Kind]++
		t.Run(v.Kind+"/"+v.Name, func(t *testing.T) {
			switch v.Kind {
			case "delivery_key":
				e, err := ParseEnvelope([]byte(req(t, v.Envelope)))
				require.NoError(t, err)
				require.Equal(t, req(t, v.DeliveryKey), e.DeliveryKey().String())
				require.Equal(t, req(t, v.CanonicalRequest), string(e.Request))
				require.Equal(t, req(t, v.CanonicalEnvelope), string(e.Canonical()))
				require.Equal(t, req(t, v.AccountToken), AccountToken(e.Account))
				th, ok := e.TextHash()
				if v.TextHash == nil {
					require.False(t, ok)
				} else {
					require.True(t, ok)
					require.Equal(t, *v.TextHash, th.String())
				}
			case "key_header":
				e, err := ParseEnvelope([]byte(req(t, v.Envelope)))
				require.NoError(t, err)
				err = CheckDeliveryKeyHeader(e, req(t, v.Header))
				if v.Reason == nil {
					require.NoError(t, err)
				} else {
					var re *RejectError
					require.ErrorAs(t, err, &re)
					require.Equal(t, *v.Reason, string(re.Reason))
				}
			case "envelope_rejection":
				_, err := ParseEnvelope(bytesOf(t, v.Envelope, v.EnvelopeHex))
				var re *RejectError
				require.ErrorAs(t, err, &re)
				require.Equal(t, req(t, v.Reason), string(re.Reason), re.Detail)
			case "source_version":
				sourceID, body := string(bytesOf(t, v.SourceID, v.SourceIDHex)), string(bytesOf(t, v.Body, v.BodyHex))
				sv, rh, err := NewSourceVersion(sourceID, body)
				require.NoError(t, err)
				id, err := CanonicalSourceID(sourceID)
				require.NoError(t, err)
				require.Equal(t, req(t, v.CanonicalSourceID), id)
				require.Equal(t, req(t, v.NormalizedBody), NormalizeBody(body))
				require.Equal(t, req(t, v.Version), sv.String())
				require.Equal(t, req(t, v.RawHash), rh.String())
			case "source_version_rejection":
				sourceID := string(bytesOf(t, v.SourceID, v.SourceIDHex))
				want, ok := map[string]error{"empty_source_id": ErrEmptySourceID, "invalid_utf8": ErrInvalidUTF8}[req(t, v.Error)]
				require.True(t, ok, "unknown error name %q", *v.Error)
				_, _, err := NewSourceVersion(sourceID, req(t, v.Body))
				require.ErrorIs(t, err, want)
				_, err = CanonicalSourceID(sourceID)
				require.ErrorIs(t, err, want)
			case "claim":
				sv, err := ParseSourceVersion(req(t, v.Version))
				require.NoError(t, err)
				c, err := NewClaimID(sv, req(t, v.Content))
				require.NoError(t, err)
				require.Equal(t, req(t, v.ClaimID), c.String())
			case "text_hash":
				text := string(bytesOf(t, v.Text, v.TextHex))
				require.Equal(t, req(t, v.Normalized), NormalizeText(text))
				require.Equal(t, req(t, v.TextHash), NewTextHash(text).String())
			case "canonical_json":
				out, err := CanonicalJSON([]byte(req(t, v.Input)))
				require.NoError(t, err)
				require.Equal(t, req(t, v.Output), string(out))
			case "canonical_json_rejection":
				in := bytesOf(t, v.Input, v.InputHex)
				canon := CanonicalJSON
				if v.ObjectReq {
					canon = CanonicalObject
				}
				_, err := canon(in)
				want, ok := jsonErrorNames[req(t, v.Error)]
				require.True(t, ok, "unknown error name %q", *v.Error)
				require.True(t, errors.Is(err, want), "got %v", err)
			case "account_token":
				account := string(bytesOf(t, v.Account, v.AccountHex))
				require.Equal(t, req(t, v.Token), AccountToken(account))
				back, err := ParseAccountToken(*v.Token)
				require.NoError(t, err)
				require.Equal(t, account, back)
			default:
				t.Fatalf("unknown vector kind %q", v.Kind)
			}
		})
	}
	for _, kind := range []string{"delivery_key", "key_header", "envelope_rejection", "source_version", "source_version_rejection",
		"claim", "text_hash", "canonical_json", "canonical_json_rejection", "account_token"} {
		require.Positive(t, count[kind], "the vector file has no %s case", kind)
	}
}
