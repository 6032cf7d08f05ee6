package matrix

import (
	"errors"
	"fmt"
	"strings"

	"github.com/atmost/atmost/pkg/platform"
)

var (
	// ErrInvalidSettings: the account's settings or credential are not a valid Matrix
	// configuration. Every error of Open about them wraps it and names the field.
	ErrInvalidSettings = errors.New("matrix: invalid settings")

	// ErrInvalidRequest: an intent cannot be rendered as a message (an action other than post,
	// a target, a request other than {"text": ...}). Prepare's errors wrap it, and it wraps
	// platform.ErrUnsendable: the dispatcher parks such an intent for a human; nothing is sent.
	ErrInvalidRequest = fmt.Errorf("matrix: invalid request: %w", platform.ErrUnsendable)

	// ErrWrongAccount: a request names another account than the one the adapter was opened for.
	ErrWrongAccount = errors.New("matrix: request for another account")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidSettings, fmt.Sprintf(format, args...))
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRequest, fmt.Sprintf(format, args...))
}

// redactor hides the access token from a string.
type redactor string

func (t redactor) redact(s string) string {
	if t == "" {
		return s
	}
	return strings.ReplaceAll(s, string(t), "[credential]")
}

// redactedError hides the access token from an error's text and keeps the chain for errors.Is.
type redactedError struct {
	err   error
	token redactor
}

func (e redactedError) Error() string { return e.token.redact(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }
