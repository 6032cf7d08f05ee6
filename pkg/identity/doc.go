// Package identity defines atmost's identities and the producers' intent
// envelope: the pure core (standard library and golang.org/x/text only) that
// decides what "the same thing" means.
//
// Four identities are content-derived, and each is its own type, so one can
// never be passed where another is expected; RawHash is capture metadata, not
// an identity, and is typed apart for the same reason:
//
//	SourceVersion  sv1:<64 hex>  canonical source id + normalized visible body
//	ClaimID        cl1:<64 hex>  source version + the claim's normalized content
//	DeliveryKey    dk1:<64 hex>  account, action, target, canonical request, occurrence
//	TextHash       th1:<64 hex>  normalized text (the duplicate-text window's key)
//	RawHash        raw1:<64 hex> plain SHA-256 of raw body bytes (forensics only)
//
// and one identity is random, never derived from content:
//
//	AttemptToken   at1:<32 hex>  16 bytes from crypto/rand, one per attempt
//
// No identity includes a timestamp or anything that differs between two
// attempts at the same work: a retry must compute the same key, or the ledger
// would refuse it as a conflicting reuse.
//
// # Hash layout
//
// Every derived identity except RawHash is SHA-256 over a sequence of fields,
// the first of which is the identity's domain string. Each field is written as
// its length in bytes (8 bytes, big-endian, unsigned) followed by the bytes:
//
//	sha256( field(domain) || field(f1) || field(f2) || ... )
//	field(b) = uint64be(len(b)) || b
//
// The domains are
//
//	"atmost/source-version/v1"  fields: canonical source id, NormalizeBody(body)
//	"atmost/claim/v1"           fields: 32 source-version bytes, NormalizeText(content)
//	"atmost/delivery-key/v1"    fields: account, action, target, canonical request, occurrence
//	"atmost/text/v1"            fields: NormalizeText(text)
//
// Length prefixes make the encoding unambiguous ("ab"+"c" never hashes like
// "a"+"bc"), and the domain keeps two identities over the same bytes apart. A
// PostgreSQL reproduces a field as
// int8send(octet_length(f)::int8) || convert_to(f, 'UTF8') and the key as
// sha256 of the concatenated fields. The
// shared vectors in testdata/identity-vectors.json at the repository root pin
// every rule here; any second implementation must pass them.
//
// # Canonical JSON
//
// CanonicalJSON implements RFC 8785 (JCS) with one deliberate strictness: a
// number is accepted only if its canonical spelling denotes exactly the same
// decimal value as the input spelling (1.0 and 1e0 are accepted and become 1;
// 12345678901234567890 and 0.10000000000000001 are rejected). What a producer
// sends is what is hashed, never a silently rounded neighbour.
//
// # The envelope
//
// ParseEnvelope is the producers' contract (docs/producers.md#the-envelope). It accepts a
// message or rejects it with a *RejectError carrying one Reason from the
// closed list in AllReasons; it never repairs input except for the documented
// canonicalizations (canonical JSON of the request, NormalizeText of the
// request's top-level "text", CanonicalSourceID of source.id).
package identity
