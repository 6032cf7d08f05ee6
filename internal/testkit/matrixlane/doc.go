// Package matrixlane is the integration lane of the Matrix adapter (pkg/platform/matrix)
// against a real homeserver: Dendrite, built from the Go module proxy by
// scripts/dendrite/install and started on loopback by scripts/dendrite/start, with SQLite in a
// temporary directory.
//
// Its tests run the adapter conformance suite (platformtest) against Dendrite, and 500 intents
// through the real ledger, relay, dispatcher and reconciler with 5 % of the sends' answers lost,
// counting what the room itself holds. Where Dendrite is not installed they skip with a message
// saying so, unless ATMOST_MATRIX_LANE=1 (set by `make test-matrix`) or CI=true, where that is a
// failure.
//
// Start runs Dendrite; Room is a room of it with the two accounts the launcher made (the bot
// that posts, an observer that reads as a person would); Proxy sits between the adapter and
// Dendrite and spoils the answer of a send at a chosen moment, so that what the adapter sees is
// known while what Dendrite did is read from Dendrite.
package matrixlane
