package identity

import (
	"encoding/base64"
	"fmt"
)

// accountTokenEscape starts every escaped token. It is outside the plain
// alphabet [A-Za-z0-9_-], so escaped and plain tokens never collide, and it is
// legal in a NATS subject token.
const accountTokenEscape = '~'

// AccountToken maps any account string to a NATS subject token, injectively:
// an account that is non-empty and made only of [A-Za-z0-9_-] is its own
// token; any other string (empty, or holding '.', '*', '>', '~', white space,
// control characters, other Unicode, even invalid UTF-8) becomes "~" followed
// by the unpadded base64url encoding of its bytes. A token is never empty and
// never contains '.', '*', '>', white space or control characters.
// ParseAccountToken inverts it.
func AccountToken(account string) string {
	if isPlainAccount(account) {
		return account
	}
	return string(accountTokenEscape) + base64.RawURLEncoding.EncodeToString([]byte(account))
}

// ParseAccountToken returns the account that AccountToken maps to token. It
// fails with ErrInvalidAccountToken for any token AccountToken cannot
// produce, including non-canonical base64 and an escaped form of an account
// that has a plain token, so tokens and accounts are in one-to-one
// correspondence.
func ParseAccountToken(token string) (string, error) {
	if isPlainAccount(token) {
		return token, nil
	}
	if token == "" || token[0] != accountTokenEscape {
		return "", fmt.Errorf("%w: %s is neither plain nor escaped", ErrInvalidAccountToken, quoteShort(token))
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token[1:])
	if err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrInvalidAccountToken, quoteShort(token), err)
	}
	account := string(raw)
	if AccountToken(account) != token {
		return "", fmt.Errorf("%w: %s is not the canonical token of its account", ErrInvalidAccountToken, quoteShort(token))
	}
	return account, nil
}

func isPlainAccount(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
