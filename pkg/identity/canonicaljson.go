package identity

import "github.com/atmost/atmost/pkg/identity/canonicaljson"

// MaxJSONDepth bounds how deeply arrays and objects may nest (the outermost
// array or object is depth 1). The bound keeps the recursive parser's stack
// small on hostile input; no legitimate request projection comes close.
const MaxJSONDepth = canonicaljson.MaxDepth

// CanonicalJSON returns the RFC 8785 (JCS) canonical form of one JSON value:
// object members sorted by UTF-16 code units, no insignificant white space,
// ECMAScript number spelling, minimal string escaping, literal UTF-8.
//
// It is stricter than RFC 8785 asks in two places and refuses rather than
// repairs: a number must have an exact canonical spelling (see
// ErrInexactNumber), and nesting is bounded by MaxJSONDepth.
//
// Failure modes, each a *JSONError matching its sentinel with errors.Is:
// ErrMalformedJSON (syntax, including an empty input or a byte-order mark),
// ErrTrailingData, ErrDuplicateKey (at any depth), ErrInvalidUTF8 (raw bytes
// or a lone surrogate escape), ErrInexactNumber, ErrTooDeep.
//
// The output is always valid UTF-8 and CanonicalJSON(out) == out.
func CanonicalJSON(data []byte) ([]byte, error) { return canonicaljson.Canonicalize(data) }

// CanonicalObject is CanonicalJSON for input that must be a JSON object. Any
// other value fails with a *JSONError matching ErrNotObject; the other
// failure modes are those of CanonicalJSON.
func CanonicalObject(data []byte) ([]byte, error) { return canonicaljson.CanonicalizeObject(data) }
