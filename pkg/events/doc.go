// Package events defines what atmost tells the world: one event per ledger transition, its
// stable id, and the NATS subjects of every stream atmost uses. It holds no transport: the
// JetStream publisher is a separate package, and this one never imports NATS.
//
// An event's id derives from the intent's delivery key and the transition's sequence number,
// so a relay that publishes the same transition twice (a crash between publish and delete)
// publishes the same id twice: JetStream drops the second inside its duplicate window
// (Nats-Msg-Id = id), and consumers dedupe on the id beyond it.
//
// Events are versioned JSON (V = 1) with a published schema, event.schema.json beside this
// file; a test validates every event kind against it. What ingest refuses is published as a
// Reject on atmost.rejected.<reason>, versioned JSON too, with reject.schema.json.
package events
