// Package dispatch is where bytes leave atmost. The dispatcher pool consumes work items from
// ATMOST_DISPATCH and, for each intent still pending: checks the cheap transient gates (while
// one refuses, no attempt is created and the work waits), opens ONE attempt with Begin,
// authorizes it immediately before the first byte, waits until JetStream acknowledged the
// authorized transition (the witness outside the database, docs/design.md#the-witness), sends once through the
// account's platform adapter, reads the object back, and records the outcome with Complete.
// The work item is acknowledged only after the ledger transition.
//
// Nothing here decides at-most-once on its own: the ledger's guarded statements do. What the
// dispatcher adds is the order (durable attempt and authorization before any byte, the witness
// before the send) and the send deadline: the send's context ends Margin before the in-flight
// lease, measured on this process's monotonic clock from before Authorize, so a worker paused
// past its lease writes nothing when it wakes.
//
// Each stage of the send path (docs/design.md#the-send-path) has a file of its own, in the
// order a work item meets them:
//
//   - dispatch.go: the Dispatcher, Run, and dispatch, which takes one batch through the stages.
//   - take.go: take a batch of work items, read their intents (pending), and the freshness
//     fence (fresh).
//   - replies.go: a reply's parent: published, it goes on to the parent's object; ended
//     without a publication, parked; otherwise it waits for the relay.
//   - gate.go: the cheap gates, the adapter and the rendered request (gate); an unsendable
//     request parked (park).
//   - cold.go: a cold account's trial: one send at a time until one succeeds, learnt from each
//     outcome (learn).
//   - stage.go: an adapter's staging (platform.Stager: Bluesky's image uploads), before any
//     attempt exists; a failure makes the work wait, nothing sent.
//   - begin.go: Begin opens one attempt per intent; its claims are published (witnessClaims).
//   - authorize.go: Authorize, the before-byte checkpoint, and the send deadline.
//   - witness.go: the witness: JetStream's acknowledgement of the authorized transition.
//   - send.go: the one send, and an authorized attempt completed as not sent.
//   - readback.go: the read-back of a claimed success, grouped per adapter.
//   - complete.go: Complete records the outcomes in batches; the work is acknowledged.
//   - work.go: a work item on its way: its spans, its rate token, its acknowledgement or delay.
//   - batching.go: the generic batching helpers (gather, waiting) of the read and completion loops.
//   - config.go, role.go, metrics.go: the configuration, the role's main, the metrics.
package dispatch
