package events

import (
	"github.com/atmost/atmost/pkg/identity"
)

// The streams atmost uses, and the subjects each one holds.
const (
	IntentsStream  = "ATMOST_INTENTS"  // producers' intents: atmost.intent.<account-token>
	EventsStream   = "ATMOST_EVENTS"   // every transition: atmost.event.<state>.<account-token>
	DispatchStream = "ATMOST_DISPATCH" // work for the dispatcher pool: atmost.dispatch.<account-token>
	RejectsStream  = "ATMOST_REJECTS"  // refused input: atmost.rejected.<reason>

	IntentSubjects   = "atmost.intent.>"
	EventSubjects    = "atmost.event.>"
	DispatchSubjects = "atmost.dispatch.>"
	RejectSubjects   = "atmost.rejected.>"
)

// IntentSubject is where a producer publishes intents for account.
func IntentSubject(account string) string {
	return "atmost.intent." + identity.AccountToken(account)
}

// EventSubject is where the event of a transition into state for account is published.
func EventSubject(state, account string) string {
	return "atmost.event." + state + "." + identity.AccountToken(account)
}

// StateSubjects is the filter of every event of a transition into state, whatever its
// account. The wildcard is written here, not passed through EventSubject, which would encode it
// as an account token and match nothing.
func StateSubjects(state string) string {
	return "atmost.event." + state + ".*"
}

// AccountSubjects is the filter of every event of account, whatever the state its transition
// entered. As in StateSubjects, the wildcard is written here and only the account goes through
// its token.
func AccountSubjects(account string) string {
	return "atmost.event.*." + identity.AccountToken(account)
}

// DispatchSubject is where the work item of an intent of account is published.
func DispatchSubject(account string) string {
	return "atmost.dispatch." + identity.AccountToken(account)
}

// RejectSubject is where refused input is published, by reason.
func RejectSubject(reason identity.Reason) string {
	return "atmost.rejected." + string(reason)
}
