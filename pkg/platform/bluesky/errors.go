package bluesky

import (
	"errors"
	"fmt"
	"strings"

	"github.com/atmost/atmost/pkg/platform"
)

var (
	// ErrInvalidSettings: the account's settings or credential are not a valid Bluesky
	// configuration. Every error of Open about them wraps it and names the field.
	ErrInvalidSettings = errors.New("bluesky: invalid settings")

	// ErrInvalidRequest: an intent cannot be rendered as a record (unknown action, a missing or
	// malformed request field, a target that differs from the strong reference). Prepare's
	// errors wrap it, and it wraps platform.ErrUnsendable: the dispatcher parks such an intent
	// for a human; nothing is sent.
	ErrInvalidRequest = fmt.Errorf("bluesky: invalid request: %w", platform.ErrUnsendable)

	// ErrWrongAccount: a request names another account than the one the adapter was opened for.
	ErrWrongAccount = errors.New("bluesky: request for another account")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidSettings, fmt.Sprintf(format, args...))
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// secrets is what must never appear in an error, an outcome's detail or a log line: the app
// password and the session's tokens.
type secrets []string

// redact replaces every secret in s.
func (ss secrets) redact(s string) string {
	for _, secret := range ss {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[credential]")
		}
	}
	return s
}

// redactedError hides the secrets from an error's text and keeps the chain for errors.Is.
type redactedError struct {
	err     error
	secrets secrets
}

func (e redactedError) Error() string { return e.secrets.redact(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }
