package atmosttype

// TransportResult is what the transport says happened to one send: what a platform adapter
// reports and the ledger records.
type TransportResult string

const (
	// Sent: the platform answered success with an object id.
	Sent TransportResult = "success"
	// NotSent: the transport PROVED nothing left (refused before any byte, or a definitive
	// refusal by the platform).
	NotSent TransportResult = "not_sent"
	// Unknown: anything else: bytes may have left and no answer proves what happened.
	Unknown TransportResult = "unknown"
)

// LookupResult is what the one reconciliation lookup found.
type LookupResult string

const (
	// Found: the platform holds the object (and the caller read it back and confirmed the
	// text): published.
	Found LookupResult = "found"
	// ProvenNotSent: an idempotency-status lookup keyed by the original request proved the
	// platform never received it: failed, and the text is released.
	ProvenNotSent LookupResult = "not_sent"
	// NotFound: nothing found, which proves nothing on an eventually consistent platform:
	// parked for a human.
	NotFound LookupResult = "not_found"
	// Unavailable: the lookup could not be made: parked for a human. The lookup is spent.
	Unavailable LookupResult = "unavailable"
)
