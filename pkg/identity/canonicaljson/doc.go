// Package canonicaljson is atmost's RFC 8785 (JCS) canonicalizer and the strict JSON parser
// under it: the canonical request a delivery key hashes, and the parsed values the intent
// envelope is read from (package identity). Standard library only.
//
// Canonicalize implements RFC 8785 with one deliberate strictness: a
// number is accepted only if its canonical spelling denotes exactly the same
// decimal value as the input spelling (1.0 and 1e0 are accepted and become 1;
// 12345678901234567890, 0.10000000000000001 and 2^53+1 are rejected, where
// RFC 8785 would hash the nearest double). What a producer sends is what is
// hashed, never a silently rounded neighbour. Everything else is RFC 8785:
// members in UTF-16 code unit order, ECMAScript number spelling (-0 is 0,
// 1e21 is 1e+21, 1E-7 is 1e-7), only '"', '\' and C0 controls escaped.
//
// Parse is stricter than encoding/json, which accepts duplicate keys and replaces invalid
// UTF-8 silently, either of which would let two different messages hash alike: it refuses
// both, bounds nesting at MaxDepth, and keeps each value's byte offset for error messages.
package canonicaljson
