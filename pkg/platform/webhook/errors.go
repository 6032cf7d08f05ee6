package webhook

import (
	"errors"
	"fmt"
	"strings"

	"github.com/atmost/atmost/pkg/platform"
)

var (
	// ErrInvalidSettings: the account's settings are not a valid webhook configuration. Every
	// error of Open about the settings or the credential wraps it, and says which field and why.
	ErrInvalidSettings = errors.New("webhook: invalid settings")

	// ErrNoReadBack is what ReadBack returns when the account declares no readback_url. Then a
	// success the endpoint claims cannot be confirmed, and the intent goes indeterminate
	// (readback_mismatch) instead of published: configure readback_url for any endpoint that
	// can return what it stored.
	ErrNoReadBack = fmt.Errorf("webhook: no readback_url is configured, so a success cannot be confirmed: %w", platform.ErrNoReadBack)
)

// redactedError hides the credential from an error's text and keeps the chain for errors.Is.
// net/http's errors do not carry header values, but a platform may echo them in a body.
type redactedError struct {
	err    error
	secret string
}

func (e redactedError) Error() string { return redact(e.err.Error(), e.secret) }
func (e redactedError) Unwrap() error { return e.err }

// redact replaces every occurrence of secret in s.
func redact(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[credential]")
}
