package atmosttype

// Signal is what one completed send says about its account's platform, fed to the account's
// health (docs/design.md#account-health). A platform adapter declares OK, Unavailable or Auth for
// a NotSent outcome; the ledger derives the signal of any other outcome, and the dispatcher's own
// not-sent is Neutral.
type Signal string

// The signals.
const (
	// SignalOK: the platform took the send, or refused it for its content: it is up.
	SignalOK Signal = "ok"
	// SignalUnavailable: a definitive failure that says the platform cannot take anything now
	// (connection refused, DNS or TLS failure, a status of DefaultUnavailableStatuses or of the
	// adapter's own declaration).
	SignalUnavailable Signal = "unavailable"
	// SignalAuth: the platform refused the credential (a status of DefaultAuthStatuses or of the
	// adapter's own declaration).
	SignalAuth Signal = "auth"
	// SignalUnknown: the outcome is unknown.
	SignalUnknown Signal = "unknown"
	// SignalNeutral: the dispatcher's own not-sent (a send it refused to start at its deadline
	// margin, a local error before any request, an Authorize whose answer was lost): nothing
	// reached the platform, so it says nothing of it and never counts toward a trip. It only
	// frees the suspect account's slot its attempt held.
	SignalNeutral Signal = "neutral"
)

// DefaultUnavailableStatuses returns the HTTP statuses of a definitive refusal that say the
// platform cannot take anything now, unless an adapter declares otherwise: 429 and 503 (a new
// slice at each call).
func DefaultUnavailableStatuses() []int { return []int{429, 503} }

// DefaultAuthStatuses returns the HTTP statuses of a definitive refusal that say the platform
// refused the credential, unless an adapter declares otherwise: 401 and 403 (a new slice at
// each call).
func DefaultAuthStatuses() []int { return []int{401, 403} }
