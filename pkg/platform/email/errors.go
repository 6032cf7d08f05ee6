package email

import (
	"errors"
	"fmt"
	"strings"

	"github.com/atmost/atmost/pkg/platform"
)

var (
	// ErrInvalidSettings: the account's settings or credential are not a valid email
	// configuration. Every error of Open about them wraps it and names the field.
	ErrInvalidSettings = errors.New("email: invalid settings")

	// ErrInvalidRequest: an intent cannot be rendered as a message (an action other than post,
	// a target, a request other than {"text": ..., "subject": ...}). Prepare's errors wrap it,
	// and it wraps platform.ErrUnsendable: the dispatcher parks such an intent; nothing is sent.
	ErrInvalidRequest = fmt.Errorf("email: invalid request: %w", platform.ErrUnsendable)

	// ErrWrongAccount: a request names another account than the one the adapter was opened for.
	ErrWrongAccount = errors.New("email: request for another account")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidSettings, fmt.Sprintf(format, args...))
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// redactor hides the password from a string.
type redactor string

func (p redactor) redact(s string) string {
	if p == "" {
		return s
	}
	return strings.ReplaceAll(s, string(p), "[credential]")
}

// redactedError hides the password from an error's text and keeps the chain for errors.Is.
type redactedError struct {
	err error
	pw  redactor
}

func (e redactedError) Error() string { return e.pw.redact(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }
