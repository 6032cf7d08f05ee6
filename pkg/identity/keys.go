package identity

// SourceVersion identifies one version of one source: SHA-256 over the
// domain "atmost/source-version/v1", the canonical source id and the
// normalized visible body (see the package documentation for the layout).
// Two fetches of an unchanged page give the same version whenever they were
// made; the fetch time is never part of it. Its text form is "sv1:" followed
// by 64 lower-case hex digits. The zero value means "no version".
type SourceVersion struct{ sum [32]byte }

const sourceVersionPrefix = "sv1:"

// ParseSourceVersion parses the text form sv1:<hex>. It returns an error matching
// ErrMalformedIdentity for a wrong prefix, a wrong length, or any digit that
// is not 0-9 or a-f (upper case included).
func ParseSourceVersion(s string) (SourceVersion, error) {
	var id SourceVersion
	if err := parseID("source version", sourceVersionPrefix, s, id.sum[:]); err != nil {
		return SourceVersion{}, err
	}
	return id, nil
}

// SourceVersionFromBytes returns the SourceVersion whose Bytes are b. It fails with
// ErrMalformedIdentity unless len(b) == 32.
func SourceVersionFromBytes(b []byte) (SourceVersion, error) {
	var id SourceVersion
	if err := idFromBytes("source version", b, id.sum[:]); err != nil {
		return SourceVersion{}, err
	}
	return id, nil
}

// String returns the text form, "sv1:" + lower-case hex.
func (id SourceVersion) String() string { return formatID(sourceVersionPrefix, id.sum[:]) }

// Bytes returns a copy of the raw 32 bytes.
func (id SourceVersion) Bytes() []byte { return append([]byte(nil), id.sum[:]...) }

// IsZero reports whether id is the zero value (all bytes zero), which no hash
// computation produces in practice and which therefore means "absent".
func (id SourceVersion) IsZero() bool { return id == SourceVersion{} }

// MarshalText returns the text form. It never fails; the zero value encodes
// as all-zero hex and parses back to the zero value.
func (id SourceVersion) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the text form with the rules of ParseSourceVersion.
func (id *SourceVersion) UnmarshalText(text []byte) error {
	parsed, err := ParseSourceVersion(string(text))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// ClaimID identifies one claim extracted from one source version: SHA-256
// over the domain "atmost/claim/v1", the 32 bytes of the SourceVersion and
// the claim's normalized content. The same sentence read from two versions
// (or two sources) gives two claims; the extraction time is never part of it.
// Text form: "cl1:" + 64 lower-case hex digits.
type ClaimID struct{ sum [32]byte }

const claimIDPrefix = "cl1:"

// ParseClaimID parses the text form cl1:<hex>. It returns an error matching
// ErrMalformedIdentity for a wrong prefix, a wrong length, or any digit that
// is not 0-9 or a-f (upper case included).
func ParseClaimID(s string) (ClaimID, error) {
	var id ClaimID
	if err := parseID("claim id", claimIDPrefix, s, id.sum[:]); err != nil {
		return ClaimID{}, err
	}
	return id, nil
}

// ClaimIDFromBytes returns the ClaimID whose Bytes are b. It fails with
// ErrMalformedIdentity unless len(b) == 32.
func ClaimIDFromBytes(b []byte) (ClaimID, error) {
	var id ClaimID
	if err := idFromBytes("claim id", b, id.sum[:]); err != nil {
		return ClaimID{}, err
	}
	return id, nil
}

// String returns the text form, "cl1:" + lower-case hex.
func (id ClaimID) String() string { return formatID(claimIDPrefix, id.sum[:]) }

// Bytes returns a copy of the raw 32 bytes.
func (id ClaimID) Bytes() []byte { return append([]byte(nil), id.sum[:]...) }

// IsZero reports whether id is the zero value (all bytes zero), which no hash
// computation produces in practice and which therefore means "absent".
func (id ClaimID) IsZero() bool { return id == ClaimID{} }

// MarshalText returns the text form. It never fails; the zero value encodes
// as all-zero hex and parses back to the zero value.
func (id ClaimID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the text form with the rules of ParseClaimID.
func (id *ClaimID) UnmarshalText(text []byte) error {
	parsed, err := ParseClaimID(string(text))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// DeliveryKey is the identity of one intended side effect, the ledger's
// unique key: SHA-256 over the domain "atmost/delivery-key/v1", the account,
// the action, the target, the canonical request projection and the
// occurrence. Different actions on the same target and request always have
// different keys. Nothing per attempt (token, generation) and no timestamp is
// part of it, so a redelivered or retried intent computes the same key.
// Text form: "dk1:" + 64 lower-case hex digits.
type DeliveryKey struct{ sum [32]byte }

const deliveryKeyPrefix = "dk1:"

// ParseDeliveryKey parses the text form dk1:<hex>. It returns an error matching
// ErrMalformedIdentity for a wrong prefix, a wrong length, or any digit that
// is not 0-9 or a-f (upper case included).
func ParseDeliveryKey(s string) (DeliveryKey, error) {
	var id DeliveryKey
	if err := parseID("delivery key", deliveryKeyPrefix, s, id.sum[:]); err != nil {
		return DeliveryKey{}, err
	}
	return id, nil
}

// DeliveryKeyFromBytes returns the DeliveryKey whose Bytes are b. It fails with
// ErrMalformedIdentity unless len(b) == 32.
func DeliveryKeyFromBytes(b []byte) (DeliveryKey, error) {
	var id DeliveryKey
	if err := idFromBytes("delivery key", b, id.sum[:]); err != nil {
		return DeliveryKey{}, err
	}
	return id, nil
}

// String returns the text form, "dk1:" + lower-case hex.
func (id DeliveryKey) String() string { return formatID(deliveryKeyPrefix, id.sum[:]) }

// Bytes returns a copy of the raw 32 bytes.
func (id DeliveryKey) Bytes() []byte { return append([]byte(nil), id.sum[:]...) }

// AppendText appends the text form, as String returns it, to b (encoding.TextAppender). It
// never fails.
func (id DeliveryKey) AppendText(b []byte) ([]byte, error) {
	return appendID(b, deliveryKeyPrefix, id.sum[:]), nil
}

// AppendHex appends the raw 32 bytes in lower-case hex, without the prefix, to b.
func (id DeliveryKey) AppendHex(b []byte) []byte { return appendID(b, "", id.sum[:]) }

// IsZero reports whether id is the zero value (all bytes zero), which no hash
// computation produces in practice and which therefore means "absent".
func (id DeliveryKey) IsZero() bool { return id == DeliveryKey{} }

// MarshalText returns the text form. It never fails; the zero value encodes
// as all-zero hex and parses back to the zero value.
func (id DeliveryKey) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the text form with the rules of ParseDeliveryKey.
func (id *DeliveryKey) UnmarshalText(text []byte) error {
	parsed, err := ParseDeliveryKey(string(text))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// TextHash is the key of the per-account duplicate-text exclusion window:
// SHA-256 over the domain "atmost/text/v1" and NormalizeText(text). The
// account is not hashed in; the window's table keeps it in its own column.
// Text form: "th1:" + 64 lower-case hex digits.
type TextHash struct{ sum [32]byte }

const textHashPrefix = "th1:"

// ParseTextHash parses the text form th1:<hex>. It returns an error matching
// ErrMalformedIdentity for a wrong prefix, a wrong length, or any digit that
// is not 0-9 or a-f (upper case included).
func ParseTextHash(s string) (TextHash, error) {
	var id TextHash
	if err := parseID("text hash", textHashPrefix, s, id.sum[:]); err != nil {
		return TextHash{}, err
	}
	return id, nil
}

// TextHashFromBytes returns the TextHash whose Bytes are b. It fails with
// ErrMalformedIdentity unless len(b) == 32.
func TextHashFromBytes(b []byte) (TextHash, error) {
	var id TextHash
	if err := idFromBytes("text hash", b, id.sum[:]); err != nil {
		return TextHash{}, err
	}
	return id, nil
}

// String returns the text form, "th1:" + lower-case hex.
func (id TextHash) String() string { return formatID(textHashPrefix, id.sum[:]) }

// Bytes returns a copy of the raw 32 bytes.
func (id TextHash) Bytes() []byte { return append([]byte(nil), id.sum[:]...) }

// IsZero reports whether id is the zero value (all bytes zero), which no hash
// computation produces in practice and which therefore means "absent".
func (id TextHash) IsZero() bool { return id == TextHash{} }

// MarshalText returns the text form. It never fails; the zero value encodes
// as all-zero hex and parses back to the zero value.
func (id TextHash) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the text form with the rules of ParseTextHash.
func (id *TextHash) UnmarshalText(text []byte) error {
	parsed, err := ParseTextHash(string(text))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}

// RawHash is the plain SHA-256 of a source body's raw bytes, with no domain
// and no normalization, so that it matches sha256sum of the captured bytes.
// It is capture metadata for forensics ("what exactly did we fetch"), never
// an identity: two fetches of an unchanged page usually differ in raw bytes.
// Text form: "raw1:" + 64 lower-case hex digits.
type RawHash struct{ sum [32]byte }

const rawHashPrefix = "raw1:"

// ParseRawHash parses the text form raw1:<hex>. It returns an error matching
// ErrMalformedIdentity for a wrong prefix, a wrong length, or any digit that
// is not 0-9 or a-f (upper case included).
func ParseRawHash(s string) (RawHash, error) {
	var id RawHash
	if err := parseID("raw hash", rawHashPrefix, s, id.sum[:]); err != nil {
		return RawHash{}, err
	}
	return id, nil
}

// RawHashFromBytes returns the RawHash whose Bytes are b. It fails with
// ErrMalformedIdentity unless len(b) == 32.
func RawHashFromBytes(b []byte) (RawHash, error) {
	var id RawHash
	if err := idFromBytes("raw hash", b, id.sum[:]); err != nil {
		return RawHash{}, err
	}
	return id, nil
}

// String returns the text form, "raw1:" + lower-case hex.
func (id RawHash) String() string { return formatID(rawHashPrefix, id.sum[:]) }

// Bytes returns a copy of the raw 32 bytes.
func (id RawHash) Bytes() []byte { return append([]byte(nil), id.sum[:]...) }

// IsZero reports whether id is the zero value (all bytes zero), which no hash
// computation produces in practice and which therefore means "absent".
func (id RawHash) IsZero() bool { return id == RawHash{} }

// MarshalText returns the text form. It never fails; the zero value encodes
// as all-zero hex and parses back to the zero value.
func (id RawHash) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses the text form with the rules of ParseRawHash.
func (id *RawHash) UnmarshalText(text []byte) error {
	parsed, err := ParseRawHash(string(text))
	if err != nil {
		return err
	}
	*id = parsed
	return nil
}
