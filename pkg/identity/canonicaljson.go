package identity

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
func CanonicalJSON(data []byte) ([]byte, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	return appendCanonical(make([]byte, 0, len(data)), &v), nil
}

// CanonicalObject is CanonicalJSON for input that must be a JSON object. Any
// other value fails with a *JSONError matching ErrNotObject; the other
// failure modes are those of CanonicalJSON.
func CanonicalObject(data []byte) ([]byte, error) {
	v, err := parseJSON(data)
	if err != nil {
		return nil, err
	}
	if v.kind != kindObject {
		return nil, &JSONError{Err: ErrNotObject, Offset: v.offset, Path: "$", Detail: "the value is " + article(v.kind)}
	}
	return appendCanonical(make([]byte, 0, len(data)), &v), nil
}

func article(k jsonKind) string {
	switch k {
	case kindArray, kindObject:
		return "an " + k.String()
	case kindNull:
		return "null"
	default:
		return "a " + k.String()
	}
}
