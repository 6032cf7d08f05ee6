package identity

import "slices"

// Reason names why an intent was rejected. The list is closed: every
// rejection that atmost stores in its rejects table and publishes on
// atmost.rejected.<reason> carries one of the constants below, and
// Reason.Valid is false for anything else. A reason is a valid NATS subject
// token.
type Reason string

// The closed list of rejection reasons.
const (
	// ReasonMalformedJSON: not JSON, trailing data, nesting too deep, or a
	// number without an exact float64 spelling outside the request.
	ReasonMalformedJSON Reason = "malformed_json"
	// ReasonNotObject: the message is JSON but not an object.
	ReasonNotObject Reason = "not_object"
	// ReasonDuplicateField: some object, at any depth, repeats a member name.
	ReasonDuplicateField Reason = "duplicate_field"
	// ReasonUnknownField: a member the contract does not define, at the top
	// level or inside source.
	ReasonUnknownField Reason = "unknown_field"
	// ReasonMissingField: a required member (v, account, action, request,
	// source.id, source.version) is absent.
	ReasonMissingField Reason = "missing_field"
	// ReasonUnsupportedVersion: v is not the number 1.
	ReasonUnsupportedVersion Reason = "unsupported_version"
	// ReasonInvalidUTF8: the message is not valid UTF-8, or a string escape
	// names a lone surrogate.
	ReasonInvalidUTF8 Reason = "invalid_utf8"
	// ReasonTooLarge: the message, or its canonical form, exceeds
	// MaxEnvelopeBytes.
	ReasonTooLarge Reason = "too_large"
	// ReasonInvalidAccount: account is not a string of 1-128 bytes without
	// control characters.
	ReasonInvalidAccount Reason = "invalid_account"
	// ReasonInvalidAction: action does not match [a-z][a-z0-9_]{0,31}.
	ReasonInvalidAction Reason = "invalid_action"
	// ReasonInvalidTarget: target is not a string of at most 1024 bytes
	// without control characters.
	ReasonInvalidTarget Reason = "invalid_target"
	// ReasonInvalidRequest: request is not an object, its top-level text is
	// not a string, or it holds a number without an exact float64 spelling or
	// nests too deeply.
	ReasonInvalidRequest Reason = "invalid_request"
	// ReasonInvalidOccurrence: occurrence is not a string of at most 128
	// bytes without control characters.
	ReasonInvalidOccurrence Reason = "invalid_occurrence"
	// ReasonInvalidSource: source is not an object, or its id or version is
	// not valid.
	ReasonInvalidSource Reason = "invalid_source"
	// ReasonInvalidKeyHeader: the Atmost-Delivery-Key header is not a
	// delivery key.
	ReasonInvalidKeyHeader Reason = "invalid_key_header"
	// ReasonKeyMismatch: the Atmost-Delivery-Key header names a different
	// key from the one computed from the envelope.
	ReasonKeyMismatch Reason = "key_mismatch"
	// ReasonSubjectMismatch: the message came on a subject other than its
	// account's, atmost.intent.<AccountToken(account)>. The subject is what
	// NATS permissions can restrict, so it binds the account: a producer
	// allowed to publish only on its own account's subject cannot name another
	// account in the envelope. Ingest decides it; this package never returns
	// it.
	ReasonSubjectMismatch Reason = "subject_mismatch"
	// ReasonUnknownAccount: the account is not in the ledger's account table.
	// Ingest decides it against the database; this package never returns it.
	ReasonUnknownAccount Reason = "unknown_account"
	// ReasonInvalidHeader: the message's NATS header block does not parse,
	// so a delivery-key header it may hold cannot be checked. Ingest decides
	// it; this package never returns it.
	ReasonInvalidHeader Reason = "invalid_header"
	// ReasonUnstorable: the database refused to store the message, as an
	// intent or as a reject, on every delivery up to ingest's bound; only its
	// size and the SHA-256 of its body are kept. Ingest decides it; this
	// package never returns it.
	ReasonUnstorable Reason = "unstorable"
	// ReasonMisdirectedReply: the message carries a NATS status (no
	// responders, a pull request's timeout, a heartbeat) or a service's
	// error header: an answer to some request that named an intent subject as
	// its reply, never a producer's intent. Ingest decides it; this package
	// never returns it.
	ReasonMisdirectedReply Reason = "misdirected_reply"
	// ReasonInvalidTime: not_before or expires_at is not an RFC 3339 time,
	// expires_at is not after not_before, or (decided by ingest against its
	// clock) not_before lies more than MaxScheduleAhead ahead.
	ReasonInvalidTime Reason = "invalid_time"
)

var allReasons = []Reason{
	ReasonMalformedJSON,
	ReasonNotObject,
	ReasonDuplicateField,
	ReasonUnknownField,
	ReasonMissingField,
	ReasonUnsupportedVersion,
	ReasonInvalidUTF8,
	ReasonTooLarge,
	ReasonInvalidAccount,
	ReasonInvalidAction,
	ReasonInvalidTarget,
	ReasonInvalidRequest,
	ReasonInvalidOccurrence,
	ReasonInvalidSource,
	ReasonInvalidKeyHeader,
	ReasonKeyMismatch,
	ReasonSubjectMismatch,
	ReasonUnknownAccount,
	ReasonInvalidHeader,
	ReasonUnstorable,
	ReasonMisdirectedReply,
	ReasonInvalidTime,
}

// AllReasons returns every Reason, in a fixed order. The slice is a copy.
func AllReasons() []Reason { return slices.Clone(allReasons) }

// Valid reports whether r is one of AllReasons.
func (r Reason) Valid() bool { return slices.Contains(allReasons, r) }

// String returns the reason's wire name, e.g. "malformed_json".
func (r Reason) String() string { return string(r) }

// RejectError is a refused intent: the Reason (from the closed list) and a
// Detail that says which field and, where known, which byte offset. Details
// quote at most a few dozen bytes of input, so a RejectError can be logged
// and stored without carrying the payload. Match it with errors.As.
type RejectError struct {
	Reason Reason
	Detail string
}

// Error returns "identity: rejected: <reason>: <detail>".
func (e *RejectError) Error() string {
	return "identity: rejected: " + string(e.Reason) + ": " + e.Detail
}

func reject(reason Reason, detail string) *RejectError {
	return &RejectError{Reason: reason, Detail: detail}
}
