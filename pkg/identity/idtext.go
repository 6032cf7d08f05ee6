package identity

import (
	"encoding/hex"
	"fmt"
)

// formatID renders an identity as prefix + lower-case hex.
func formatID(prefix string, b []byte) string {
	return string(appendID(make([]byte, 0, len(prefix)+hex.EncodedLen(len(b))), prefix, b))
}

// appendID appends the text form formatID returns to dst: the relay writes every event's keys
// into its payload, and a string of each would be two allocations per identity and event.
func appendID(dst []byte, prefix string, b []byte) []byte {
	return hex.AppendEncode(append(dst, prefix...), b)
}

// parseID fills dst from prefix + exactly 2*len(dst) lower-case hex digits.
// Upper-case digits are refused so that every identity has exactly one text
// form, and a text comparison in SQL is an identity comparison.
func parseID(kind, prefix, s string, dst []byte) error {
	if len(s) != len(prefix)+2*len(dst) || s[:len(prefix)] != prefix {
		return fmt.Errorf("%w: %s must be %q followed by %d lower-case hex digits, got %s",
			ErrMalformedIdentity, kind, prefix, 2*len(dst), quoteShort(s))
	}
	digits := s[len(prefix):]
	for i := 0; i < len(digits); i++ {
		if c := digits[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return fmt.Errorf("%w: %s has %s at position %d; only 0-9 and a-f are allowed",
				ErrMalformedIdentity, kind, quoteShort(string(c)), len(prefix)+i)
		}
	}
	_, err := hex.Decode(dst, []byte(digits))
	return err
}

func idFromBytes(kind string, b []byte, dst []byte) error {
	if len(b) != len(dst) {
		return fmt.Errorf("%w: %s must be %d bytes, got %d", ErrMalformedIdentity, kind, len(dst), len(b))
	}
	copy(dst, b)
	return nil
}
