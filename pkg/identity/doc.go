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
// every rule here, each code point of the text rule included; any second
// implementation must pass them, as clients/typescript/identity does.
//
// # The text rule
//
// NormalizeText is NFC with the Unicode 15.0.0 tables of golang.org/x/text
// (characters unassigned in 15.0 are left as they are, so a newer NFC can
// disagree only on the 20 characters with canonical decompositions added
// since), then CRLF and lone CR to LF, then trimming of the 25 White_Space
// code points U+0009-000D, U+0020, U+0085, U+00A0, U+1680, U+2000-200A,
// U+2028, U+2029, U+202F, U+205F and U+3000 (unicode.IsSpace, the Unicode
// 15.0 property). U+FEFF, U+200B and U+001C-001F are not White_Space and are
// kept, which is where JavaScript's trim() and Python's strip() differ.
// Invalid UTF-8 and lone surrogate escapes never reach it from an envelope:
// ParseEnvelope rejects them as invalid_utf8. docs/producers.md#the-text-rule
// states the rule for producers.
//
// # Canonical JSON
//
// CanonicalJSON is RFC 8785 (JCS) with one deliberate strictness, an exact
// number spelling; package canonicaljson holds the canonicalizer and states its rules.
//
// # The envelope
//
// ParseEnvelope is the producers' contract (docs/producers.md#the-envelope). It accepts a
// message or rejects it with a *RejectError carrying one Reason from the
// closed list in AllReasons; it never repairs input except for the documented
// canonicalizations (canonical JSON of the request, NormalizeText of the
// request's top-level "text", CanonicalSourceID of source.id).
package identity
