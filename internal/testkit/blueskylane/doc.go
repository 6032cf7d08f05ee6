// Package blueskylane is the integration lane of the Bluesky adapter (pkg/platform/bluesky)
// against a real PDS: the reference implementation (@atproto/pds, with an in-process PLC
// directory from @atproto/dev-env) started on loopback by scripts/bluesky-pds/start.mjs.
//
// Its tests drive intents through the real ledger, relay, dispatcher and reconciler, and check
// what the PDS itself holds. They need Node 22 and the packages scripts/bluesky-pds/install
// puts in place; where those are absent they skip with a message saying so, unless
// ATMOST_BLUESKY_LANE=1 (set by `make test-bluesky`) or CI=true (`.ci/run`, whose `make test`
// runs the lane), where that is a failure. They are not in make test-short's lane.
//
// Start runs the PDS; Proxy sits between the adapter and the PDS and drops a connection at a
// chosen step of a createRecord (one planned, or a seeded share of them), so that the outcome the adapter sees is unknown while what the
// PDS did is known; it also drops uploadBlob answers on demand (DropUploads). FaultProxy is an
// HTTP proxy that plays the conformance suite's endings of one createRecord (platformtest) and
// records the creates and the tokens it saw.
package blueskylane
