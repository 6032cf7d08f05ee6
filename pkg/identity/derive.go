package identity

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
)

// The domain strings, the first field of every derived identity. Changing any
// rule behind an identity means a new domain (".../v2") and a new text
// prefix, never a silent change of what an existing key means.
const (
	domainSourceVersion = "atmost/source-version/v1"
	domainClaim         = "atmost/claim/v1"
	domainDeliveryKey   = "atmost/delivery-key/v1"
	domainText          = "atmost/text/v1"
)

// hashFields returns SHA-256 over field(domain) || field(f1) || ..., where
// field(b) is len(b) as 8 bytes big-endian followed by b.
func hashFields(domain string, fields ...[]byte) [32]byte {
	h := sha256.New()
	writeField(h, []byte(domain))
	for _, f := range fields {
		writeField(h, f)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

func writeField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// NewSourceVersion derives the version of a source from its id and visible
// body: SHA-256 over "atmost/source-version/v1", CanonicalSourceID(sourceID)
// and NormalizeBody(body). It also returns the RawHash of the body's exact
// bytes, to be kept in capture metadata. Nothing else (fetch time, headers)
// enters the version.
//
// Errors: those of CanonicalSourceID (ErrEmptySourceID, ErrInvalidUTF8 in the
// id). Invalid UTF-8 in body is not an error: NormalizeBody replaces it, and
// the RawHash still records the exact bytes.
func NewSourceVersion(sourceID, body string) (SourceVersion, RawHash, error) {
	id, err := CanonicalSourceID(sourceID)
	if err != nil {
		return SourceVersion{}, RawHash{}, fmt.Errorf("source version: %w", err)
	}
	v := SourceVersion{sum: hashFields(domainSourceVersion, []byte(id), []byte(NormalizeBody(body)))}
	return v, NewRawHash([]byte(body)), nil
}

// NewRawHash returns the plain SHA-256 of b.
func NewRawHash(b []byte) RawHash {
	return RawHash{sum: sha256.Sum256(b)}
}

// NewClaimID derives a claim's identity from the source version it rests on
// and its content: SHA-256 over "atmost/claim/v1", the 32 version bytes and
// NormalizeText(content). Errors: ErrZeroSourceVersion for a zero version,
// ErrEmptyClaim when the normalized content is empty.
func NewClaimID(version SourceVersion, content string) (ClaimID, error) {
	if version.IsZero() {
		return ClaimID{}, fmt.Errorf("claim id: %w", ErrZeroSourceVersion)
	}
	content = NormalizeText(content)
	if content == "" {
		return ClaimID{}, fmt.Errorf("claim id: %w", ErrEmptyClaim)
	}
	return ClaimID{sum: hashFields(domainClaim, version.sum[:], []byte(content))}, nil
}

// NewTextHash returns the duplicate-text window key of text: SHA-256 over
// "atmost/text/v1" and NormalizeText(text). Texts that SameText considers
// equal have equal hashes. It never fails; the empty text has a hash like
// any other.
func NewTextHash(text string) TextHash {
	return TextHash{sum: hashFields(domainText, []byte(NormalizeText(text)))}
}

// deliveryKey hashes an already validated projection. It is unexported on
// purpose: a key computed from an unvalidated, non-canonical request would
// look valid and never match. Envelope.DeliveryKey is the only way in.
//
// A reply (replyTo not zero) hashes one more field, the parent's 32 key bytes:
// the fields are length-prefixed, so six fields never hash like five, and every
// key computed before replies existed is unchanged.
func deliveryKey(account, action, target string, request []byte, occurrence string, replyTo DeliveryKey) DeliveryKey {
	fields := [][]byte{[]byte(account), []byte(action), []byte(target), request, []byte(occurrence)}
	if !replyTo.IsZero() {
		fields = append(fields, replyTo.sum[:])
	}
	return DeliveryKey{sum: hashFields(domainDeliveryKey, fields...)}
}
