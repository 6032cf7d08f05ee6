package identity

import (
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/atmost/atmost/pkg/identity/canonicaljson"
)

// Sentinel errors. Every error returned by this package matches one of them
// with errors.Is, except *RejectError, which ParseEnvelope and
// CheckDeliveryKeyHeader return and which is matched with errors.As.
var (
	// The JSON sentinels are canonicaljson's, the same values: CanonicalJSON,
	// CanonicalObject and ParseEnvelope return them.

	// ErrMalformedJSON: the input is not JSON (syntax error, unexpected end).
	ErrMalformedJSON = canonicaljson.ErrMalformedJSON
	// ErrTrailingData: a complete JSON value is followed by more than white space.
	ErrTrailingData = canonicaljson.ErrTrailingData
	// ErrDuplicateKey: an object, at any depth, names the same member twice
	// (after unescaping, so "a" and "\u0061" are the same name).
	ErrDuplicateKey = canonicaljson.ErrDuplicateKey
	// ErrInvalidUTF8: raw bytes that are not UTF-8, or an escape that names a
	// lone surrogate.
	ErrInvalidUTF8 = canonicaljson.ErrInvalidUTF8
	// ErrNotObject: an object was required and the value is something else.
	ErrNotObject = canonicaljson.ErrNotObject
	// ErrInexactNumber: a number is not finite in float64, or its canonical
	// spelling would denote a different decimal value than the one sent.
	ErrInexactNumber = canonicaljson.ErrInexactNumber
	// ErrTooDeep: arrays and objects nest deeper than MaxJSONDepth.
	ErrTooDeep = canonicaljson.ErrTooDeep

	// ErrMalformedIdentity: text or bytes that are not a valid identity of the
	// requested type (wrong prefix, wrong length, upper-case or non-hex digits).
	ErrMalformedIdentity = errors.New("identity: malformed identity")
	// ErrEmptySourceID: a source id that is empty after trimming.
	ErrEmptySourceID = errors.New("identity: empty source id")
	// ErrZeroSourceVersion: a claim was derived from the zero SourceVersion.
	ErrZeroSourceVersion = errors.New("identity: zero source version")
	// ErrEmptyClaim: a claim whose normalized content is empty.
	ErrEmptyClaim = errors.New("identity: empty claim content")
	// ErrInvalidAccountToken: a subject token that AccountToken cannot have
	// produced.
	ErrInvalidAccountToken = errors.New("identity: invalid account token")
	// ErrRandomSource: the random source failed while minting an AttemptToken.
	ErrRandomSource = errors.New("identity: random source failed")
)

// JSONError describes why CanonicalJSON or CanonicalObject refused its input:
// which rule (Err, one of the JSON sentinels above), where (byte Offset into
// the input, and Path, a JSONPath-like location such as `$.request.items[2]`)
// and a short Detail that never echoes more than a few bytes of input.
type JSONError = canonicaljson.Error

// maxEchoBytes bounds how much of the input an error message repeats, so a
// rejection can be logged and published without carrying the payload.
const maxEchoBytes = 32

// quoteShort quotes at most maxEchoBytes of s (cut at a rune boundary), with
// invalid bytes and control characters escaped by strconv.Quote.
func quoteShort(s string) string {
	if len(s) <= maxEchoBytes {
		return strconv.Quote(s)
	}
	cut := maxEchoBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "..."
}
