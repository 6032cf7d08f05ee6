// Package platformtest is the conformance suite for platform adapters: the contract every
// platform.Adapter must meet, stated here in words and checked by Run against a platform the
// adapter's own test supplies and steers (a fake or simulated server over real HTTP). The
// contract is what lets atmost promise at most once: the dispatcher and the reconciler trust
// an adapter's outcomes, read-backs and lookups without knowing the platform, so an adapter
// that claims more than it proved breaks that promise for every account it serves.
//
// An adapter's test runs the suite from a TestConformance:
//
//	func TestConformance(t *testing.T) {
//		platformtest.Run(t, platformtest.Harness{Open: ..., Request: ...})
//	}
//
// # The contract
//
// Capabilities. They are fixed for the adapter's life: a caller that changes the slice it got
// changes nothing. Only 4xx statuses may be declared definitive: a 5xx can come from a server
// that failed half way through its write, a 2xx or 3xx is no refusal. ReconcileDelay is
// positive: a request can still be inside the platform when the send's deadline passes, and
// a lookup made before it landed would answer for a platform that has not seen it yet.
//
// Prepare. It sends nothing: no request of any kind reaches the platform. Two Prepares of the
// same request give the same wire request and hash (an adapter whose bytes carry the moment
// of Prepare, as a record's creation time, lets its harness stop its clock); another delivery
// key gives another hash. The hash is platform.NewPrepared's over the wire fields, and the
// Prepared carries the request it was made from, because the dispatcher binds that hash to the
// attempt and the ledger refuses any other. No credential is part of it: the adapter adds
// credentials at send time, so the hash is the same whoever's credential sends it.
//
// Send. Exactly one create request reaches the platform per Send: no retry of any kind, not
// after a dropped connection, a 5xx, a 429 with Retry-After, or on a reused connection that
// died (net/http replays those on its own unless the transport forbids it), and no redirect
// followed (a 307 would send the body again, elsewhere). What reaches the platform is the
// prepared body, byte for byte. The ending is classified by the transport's table
// (transport.Outcomes):
//
//   - NotSent only when nothing can have been created: no connection was ever obtained (the
//     platform is unreachable, or the deadline had passed: then nothing at all is sent), the
//     prepared request no longer matches its hash (then it is not sent at all), or the platform
//     answered a status the adapter declares definitive. Its Reason is connection_failed or
//     platform_rejected.
//   - Unknown for everything after bytes may have left: a connection dropped before or after
//     the platform read or committed the request, a 5xx, a 4xx the adapter does not declare
//     definitive, a 3xx, a 2xx that names no object, an answer slower than the deadline. Its
//     Reason is send_unknown. An adapter that cannot tell must say Unknown: the intent then
//     waits for one lookup and is never sent again.
//   - Sent only for a success that names the created object: ObjectID is the id the
//     platform gave the object the request created, and Reason is empty.
//
// NotSent and Unknown carry no object id. No outcome, lookup or error shows a credential or a
// token the platform issued, even when the platform echoes one back.
//
// ReadBack. It returns the object's id and the text the platform holds now, as the platform
// stores it: never the request's text. So an object edited on the platform reads back with
// its new text, and the comparison with the intent's text (normalized, identity.SameText)
// sees the mismatch. An object the platform does not have (deleted, or never created) is
// platform.ErrNotFound; a platform that could not be asked is another error, never
// ErrNotFound, because not-found is an answer and a failed read is none. An adapter that
// cannot read objects back declares it by answering platform.ErrNoReadBack for every object,
// before any request: then a success cannot be confirmed and the intent goes indeterminate.
// A platform.ManyReader answers each item of a grouped read as ReadBack would answer it
// alone. Reads create nothing.
//
// Lookup. It claims only what the platform answered:
//
//   - Found carries the id of an object the request created. Against a platform that holds
//     the object and answers normally, the lookup finds it, or answers Unavailable when the
//     adapter has no way to look (it says why in Detail); NotFound there would be a false
//     claim about a platform that is consistent.
//   - NotFound says the platform has no object for the request now. It proves not-sent
//     (ProvenNotSent) only when the adapter declares Capabilities().StatusLookup, that is when
//     the platform answers, for the original request's key, whether any request with it
//     created anything, and never when the request created an object, even one deleted since.
//     An adapter that declares StatusLookup proves not-sent for a request the platform never
//     received.
//   - Unavailable carries neither an object id nor a proof: the platform could not tell, or
//     could not be asked.
//
// A lookup creates nothing.
//
// # What the harness supplies
//
// A Harness opens the adapter against a fresh platform for each case and gives the suite
// requests of the adapter's account. The Platform it returns is steered by the suite (how the
// next create is answered, an object edited or deleted, the platform stopped) and tells the
// suite the platform's own truth: the create requests it received and the objects they
// created. The suite checks every outcome, read-back and lookup against that truth, never
// against what the adapter says about itself.
//
// A case the adapter cannot support is skipped with the declaration that rules it out: the
// status-lookup cases when Capabilities().StatusLookup is false, the read-back cases when
// ReadBack answers platform.ErrNoReadBack, the grouped read when the adapter is no
// platform.ManyReader. A clause an adapter is known to break is listed in
// Harness.Exceptions with why; the suite skips it with that reason, and each one is a
// finding to fix.
package platformtest
