// Package client is atmost's Go client, for the producers that publish intents and for the
// services downstream that follow what became of them. It imports nothing of atmost's
// internals, so any module can use it with a NATS connection and no database access.
//
// A producer publishes an Intent instead of hand-written JSON:
//
//	c, err := client.New(nc, client.Config{})
//	receipt, err := c.Publish(ctx, client.Intent{Account: "news-bot", Action: "post",
//		Request: map[string]any{"text": "Hello, world"}})
//	outcome, err := c.Await(ctx, receipt.Account, receipt.Key, client.Seq(receipt.Seq))
//
// Publish validates the intent with the very code ingest runs (identity.NewEnvelope, so a
// refusal is an *identity.RejectError with ingest's reason), computes its delivery key, and
// publishes its canonical envelope on atmost.intent.<account-token> with the key as
// Nats-Msg-Id and as Atmost-Delivery-Key. The receipt names the key, the message's sequence in
// ATMOST_INTENTS and whether JetStream found it a duplicate.
//
// # Publishing again is always safe
//
// The delivery key is derived from the intent's content, so publishing the same intent twice
// is one intent: JetStream drops the second message inside its duplicate window (the receipt
// says Duplicate), and the ledger counts a later one as a duplicate of the stored intent. So a
// publish whose outcome is unknown (no acknowledgement in time, a disconnect, a context that
// ended while waiting, a write that failed part way, a server error from the stream) is not a
// failure: it is ErrMaybePublished, and the remedy is to publish the same intent again, with
// the same occurrence; never a new occurrence, which would be a second intent and a second
// send if the first was stored. A plain error means the message was certainly not stored (the
// intent itself was refused, no stream took the subject, the stream refused the message with a
// 4xx before storing it); publishing it again is as safe, and succeeds once the cause is gone.
//
// Inside JetStream's duplicate window (docs/design.md#streams-and-events) a re-publication of an intent that ingest refused
// (an account not yet configured) is dropped by JetStream as a duplicate of the refused
// message: the receipt says Duplicate and nothing new is ingested. Once the cause is fixed,
// wait out the window or have an operator replay the stored reject.
//
// # Many intents
//
// PublishAsync and PublishAll keep up to Config.MaxInFlight publishes waiting for their
// acknowledgements at once (nats.go's PublishMsgAsync), which is what keeps up with ingest;
// Publish is PublishAsync and a wait.
//
// # The outcome
//
// Status and Await ask the outcome service, a NATS request/reply service named atmost-status
// that the ingest role serves from the ledger (`nats micro ls` lists it), on
// atmost.status.<account-token>: the account is part of the subject so that a producer's NATS
// account imports the service for its own accounts only, as it imports their intent subjects
// (docs/producers.md#nats-accounts: there Config.JetStreamAPI and FollowConfig.Bind apply). Await subscribes to
// the account's events on ATMOST_EVENTS first and asks Status second, so no transition can
// fall between the two; it asks again on each of the intent's events, and every
// Config.PollInterval in case an event was missed. Given the sequence of the message that
// carried the intent (Seq), an intent that ingest refused is an outcome too (Rejected).
//
// # Following events
//
// Follow is a durable JetStream consumer on ATMOST_EVENTS, filtered by account, by state or
// both, that hands each event to a function once, acknowledges it after the function returned
// nil, and resumes after the last acknowledged event when it is started again with the same
// durable name.
package client
