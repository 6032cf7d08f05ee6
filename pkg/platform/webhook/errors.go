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
	// success the endpoint claims is confirmed only by the account's other choice: the status
	// lookup after the reconcile delay (status_url), or the response itself (confirm).
	ErrNoReadBack = fmt.Errorf("webhook: no readback_url is configured, so a success cannot be read back: %w", platform.ErrNoReadBack)

	// ErrNothingConfirms: the settings give no way to confirm a success, so every success
	// would end parked for a person. Open refuses them (wrapped in ErrInvalidSettings), which
	// refuses them at `atmost accounts add` and update, and holds a stored account's intents
	// pending, nothing sent, until its settings name a choice.
	ErrNothingConfirms = errors.New(`nothing confirms a success: set one of readback_url (the object is read back by id and its text compared), status_url (the delivery key is looked up after reconcile_delay) or "confirm": "response" (a 2xx naming the object is taken as proof, recorded as published_unread)`)
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
