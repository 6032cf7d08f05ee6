// Package atmosttype is atmost's shared vocabulary: the six states of an intent, the reasons
// with the state each leads to, what a send's transport reports (TransportResult), what a
// reconciliation lookup found (LookupResult) and what a send says about its account's platform
// (Signal). The ledger, the platform adapters, the events and the client speak it, so one word
// has one type and one spelling everywhere; it imports nothing but the standard library, and
// every table it holds is returned as a copy.
package atmosttype
