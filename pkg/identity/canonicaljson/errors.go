package canonicaljson

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Sentinel errors. Every error returned by this package is an *Error matching one of them
// with errors.Is. Their text names package identity, which re-exports them under the same
// names: a rejection's message stays what producers have always read.
var (
	// ErrMalformedJSON: the input is not JSON (syntax error, unexpected end).
	ErrMalformedJSON = errors.New("identity: malformed JSON")
	// ErrTrailingData: a complete JSON value is followed by more than white space.
	ErrTrailingData = errors.New("identity: trailing data after JSON value")
	// ErrDuplicateKey: an object, at any depth, names the same member twice
	// (after unescaping, so "a" and "\u0061" are the same name).
	ErrDuplicateKey = errors.New("identity: duplicate object key")
	// ErrInvalidUTF8: raw bytes that are not UTF-8, or an escape that names a
	// lone surrogate.
	ErrInvalidUTF8 = errors.New("identity: invalid UTF-8")
	// ErrNotObject: an object was required and the value is something else.
	ErrNotObject = errors.New("identity: JSON value is not an object")
	// ErrInexactNumber: a number is not finite in float64, or its canonical
	// spelling would denote a different decimal value than the one sent.
	ErrInexactNumber = errors.New("identity: number does not round-trip exactly through float64")
	// ErrTooDeep: arrays and objects nest deeper than MaxDepth.
	ErrTooDeep = errors.New("identity: JSON nesting too deep")
)

// Error describes why Canonicalize, CanonicalizeObject or Parse refused its input:
// which rule (Err, one of the sentinels above), where (byte Offset into
// the input, and Path, a JSONPath-like location such as `$.request.items[2]`)
// and a short Detail that never echoes more than a few bytes of input.
type Error struct {
	Err    error
	Offset int
	Path   string
	Detail string
}

// Error formats the rule, the location and the detail.
func (e *Error) Error() string {
	return fmt.Sprintf("%v at byte %d (%s): %s", e.Err, e.Offset, e.Path, e.Detail)
}

// Unwrap returns the sentinel, so errors.Is(err, ErrDuplicateKey) works.
func (e *Error) Unwrap() error { return e.Err }

// maxEchoBytes bounds how much of the input an error message repeats, so a
// rejection can be logged and published without carrying the payload.
const maxEchoBytes = 32

// quoteShort quotes at most maxEchoBytes of s (cut at a rune boundary), with
// invalid bytes and control characters escaped by strconv.Quote. Package identity
// quotes its own inputs the same way.
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
