package atmosttype

import "slices"

// State is the state of a delivery intent. There are exactly six.
type State string

// The six states. A claimed but not yet authorized intent is Pending with an open attempt and
// a live pre-authorization lease.
const (
	// Pending: waiting for, or claimed by, a worker. Nothing has been authorized.
	Pending State = "pending"
	// Authorized: the before-byte checkpoint passed; bytes may be leaving. Only the worker's
	// outcome or the expiry of its lease moves it on, and never back to Pending.
	Authorized State = "authorized"
	// Published: the platform holds the object and the read-back confirmed its text. Terminal.
	Published State = "published"
	// Failed: nothing was sent, proven. The only state from which a retry is allowed.
	Failed State = "failed"
	// Indeterminate: the outcome is unknown. Never retried; reconciled by one lookup.
	Indeterminate State = "indeterminate"
	// Parked: a human owns it. No machine moves it on.
	Parked State = "parked"
)

// states are the six states in lifecycle order.
var states = [...]State{Pending, Authorized, Published, Failed, Indeterminate, Parked}

// States returns the six states in lifecycle order (a new slice at each call).
func States() []State { return slices.Clone(states[:]) }

// Valid reports whether s is one of the six states.
func (s State) Valid() bool {
	for _, v := range states {
		if s == v {
			return true
		}
	}
	return false
}
