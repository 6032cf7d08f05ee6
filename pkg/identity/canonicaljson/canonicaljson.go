package canonicaljson

// Canonicalize returns the RFC 8785 (JCS) canonical form of one JSON value:
// object members sorted by UTF-16 code units, no insignificant white space,
// ECMAScript number spelling, minimal string escaping, literal UTF-8.
//
// It is stricter than RFC 8785 asks in two places and refuses rather than
// repairs: a number must have an exact canonical spelling (see
// ErrInexactNumber), and nesting is bounded by MaxDepth.
//
// Failure modes, each an *Error matching its sentinel with errors.Is:
// ErrMalformedJSON (syntax, including an empty input or a byte-order mark),
// ErrTrailingData, ErrDuplicateKey (at any depth), ErrInvalidUTF8 (raw bytes
// or a lone surrogate escape), ErrInexactNumber, ErrTooDeep.
//
// The output is always valid UTF-8 and Canonicalize(out) == out.
func Canonicalize(data []byte) ([]byte, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	return AppendCanonical(make([]byte, 0, len(data)), &v), nil
}

// CanonicalizeObject is Canonicalize for input that must be a JSON object. Any
// other value fails with an *Error matching ErrNotObject; the other
// failure modes are those of Canonicalize.
func CanonicalizeObject(data []byte) ([]byte, error) {
	v, err := Parse(data)
	if err != nil {
		return nil, err
	}
	if v.Kind != KindObject {
		return nil, &Error{Err: ErrNotObject, Offset: v.Offset, Path: "$", Detail: "the value is " + Article(v.Kind)}
	}
	return AppendCanonical(make([]byte, 0, len(data)), &v), nil
}

// Article names a kind with its article, as an error message does ("an object", "null",
// "a string").
func Article(k Kind) string {
	switch k {
	case KindArray, KindObject:
		return "an " + k.String()
	case KindNull:
		return "null"
	default:
		return "a " + k.String()
	}
}
