package identity

import (
	"crypto/rand"
	"fmt"
	"io"
)

// AttemptToken identifies one attempt at delivering an intent: 16 bytes from
// crypto/rand, minted by begin() for every new attempt. It is deliberately
// not derived from content, so two attempts at the same delivery key never
// share a token. Text form: "at1:" + 32 lower-case hex digits. The zero value
// means "no attempt".
type AttemptToken struct{ b [16]byte }

const attemptTokenPrefix = "at1:"

// NewAttemptToken returns a fresh random token. It fails (ErrRandomSource)
// only if the operating system's random source fails.
func NewAttemptToken() (AttemptToken, error) {
	return attemptTokenFrom(rand.Reader)
}

func attemptTokenFrom(r io.Reader) (AttemptToken, error) {
	var t AttemptToken
	if _, err := io.ReadFull(r, t.b[:]); err != nil {
		return AttemptToken{}, fmt.Errorf("%w: %w", ErrRandomSource, err)
	}
	return t, nil
}

// ParseAttemptToken parses the text form at1:<32 hex>. It returns an error
// matching ErrMalformedIdentity for a wrong prefix, a wrong length, or any
// digit that is not 0-9 or a-f (upper case included).
func ParseAttemptToken(s string) (AttemptToken, error) {
	var t AttemptToken
	if err := parseID("attempt token", attemptTokenPrefix, s, t.b[:]); err != nil {
		return AttemptToken{}, err
	}
	return t, nil
}

// AttemptTokenFromBytes returns the token whose Bytes are b. It fails with
// ErrMalformedIdentity unless len(b) == 16.
func AttemptTokenFromBytes(b []byte) (AttemptToken, error) {
	var t AttemptToken
	if err := idFromBytes("attempt token", b, t.b[:]); err != nil {
		return AttemptToken{}, err
	}
	return t, nil
}

// String returns the text form, "at1:" + lower-case hex.
func (t AttemptToken) String() string { return formatID(attemptTokenPrefix, t.b[:]) }

// Bytes returns a copy of the raw 16 bytes.
func (t AttemptToken) Bytes() []byte { return append([]byte(nil), t.b[:]...) }

// AppendText appends the text form, as String returns it, to b (encoding.TextAppender). It
// never fails.
func (t AttemptToken) AppendText(b []byte) ([]byte, error) {
	return appendID(b, attemptTokenPrefix, t.b[:]), nil
}

// IsZero reports whether t is the zero value, which NewAttemptToken returns
// only together with an error.
func (t AttemptToken) IsZero() bool { return t == AttemptToken{} }

// MarshalText returns the text form. It never fails.
func (t AttemptToken) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText parses the text form with the rules of ParseAttemptToken.
func (t *AttemptToken) UnmarshalText(text []byte) error {
	parsed, err := ParseAttemptToken(string(text))
	if err != nil {
		return err
	}
	*t = parsed
	return nil
}
