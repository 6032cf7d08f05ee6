// Package platformsim is a small social platform over HTTP: the platform's own truth for every
// atmost test and for the demo. It creates objects (posts, likes, ...) keyed by the caller's
// Idempotency-Key, counts per key how many creates it received and how many it committed, and
// injects faults on demand (dropped connections before or after the commit, errors after the
// commit, delays, rate limits, definitive refusals) from a seeded, replaceable fault plan.
//
// The invariant the simulator exists to check: for every delivery key, Counts().Created is at
// most one. Without Config.Dedupe the simulator does nothing to help: every create request
// that reaches a commit creates a new object, so a double send by atmost shows as two objects.
//
// The simulator keeps everything in memory, behind one mutex; a restart forgets every object.
// Run it in-process (New, then Handler or Serve) or as the platformsim binary (Main).
//
// HTTP API (JSON):
//
//	POST /v1/accounts/{account}/{action}   create (header Idempotency-Key; body a JSON object)
//	GET  /v1/objects/{id}                  one object, 404 when none
//	GET  /v1/accounts/{account}/objects    the account's objects older than ListLag (?key=)
//	GET  /v1/idempotency/{key}             created | in_progress | not_seen (Config.StatusLookup)
//	GET  /v1/counts                        created and received per key, totals
//	GET  /v1/plan, PUT /v1/plan            read or replace the fault plan
package platformsim
