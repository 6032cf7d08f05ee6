package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/atmost/atmost/pkg/identity/canonicaljson"
)

// Limits of the envelope contract (docs/producers.md#the-envelope).
const (
	// MaxEnvelopeBytes bounds both the message as received and its canonical
	// form (which can be longer: 1e20 is written out in full, and absent
	// target and occurrence are written as ""). Bounding both keeps
	// ParseEnvelope(e.Canonical()) from failing for any accepted e.
	MaxEnvelopeBytes = 64 << 10
	// MaxAccountBytes bounds account; it must also be at least 1 byte.
	MaxAccountBytes = 128
	// MaxActionBytes bounds action, whose form is [a-z][a-z0-9_]{0,31}.
	MaxActionBytes = 32
	// MaxTargetBytes bounds target.
	MaxTargetBytes = 1024
	// MaxOccurrenceBytes bounds occurrence.
	MaxOccurrenceBytes = 128
	// MaxSourceIDBytes bounds source.id, measured after CanonicalSourceID.
	MaxSourceIDBytes = 2048
	// MaxScheduleAhead bounds how far ahead of ingest's clock not_before may lie when the
	// intent is stored (CheckSchedule): an intent is a send to make, not a calendar.
	MaxScheduleAhead = 30 * 24 * time.Hour
)

// EnvelopeVersion is the only envelope version ("v") this package accepts.
const EnvelopeVersion = 1

// Envelope is a validated delivery intent, as a producer published it. Every
// field is in canonical form: Request is canonical JSON with its top-level
// "text" normalized, Source.ID is a canonical source id. Only ParseEnvelope
// and NewEnvelope produce valid Envelopes; the methods are defined for those,
// not for hand-assembled values.
type Envelope struct {
	// V is the envelope version, always EnvelopeVersion.
	V int
	// Account is the producer's account id, 1-128 bytes of UTF-8 without
	// control characters, kept byte for byte (not normalized).
	Account string
	// Action is the action kind, [a-z][a-z0-9_]{0,31}.
	Action string
	// Target is the target's stable identity, "" when the action has none.
	// Kept byte for byte: a producer must send a stable spelling.
	Target string
	// Request is the canonical request projection (RFC 8785 JSON object),
	// with the top-level "text" member, if any, replaced by
	// NormalizeText(text). Only the top-level "text" is normalized; text in
	// nested members is hashed as sent.
	Request json.RawMessage
	// Occurrence distinguishes deliberate repeats of the same request; ""
	// when absent.
	Occurrence string
	// Source, if not nil, names the source version the intent rests on. It
	// is not part of the delivery key.
	Source *Source
	// ReplyTo, when not zero, names the intent this one answers (a reply, the
	// next post of a thread) by its delivery key, instead of a literal Target
	// (which is then ""): the intent waits until that one is published and
	// targets the object it created. It is part of the delivery key; the
	// object id, known only later, never is.
	ReplyTo DeliveryKey
	// NotBefore, if not zero, is the earliest time the intent may be authorized; ExpiresAt, if
	// not zero, the time from which it never will be (it is parked expired). Both are in UTC,
	// to the microsecond, and ExpiresAt is after NotBefore when both are set. They are
	// attributes of the intent, never part of the delivery key: an intent published again
	// with other times is the same intent, and the first stored times stand.
	NotBefore, ExpiresAt time.Time
}

// Source is the optional source reference of an envelope.
type Source struct {
	// ID is the canonical source id (CanonicalSourceID), 1-2048 bytes.
	ID string
	// Version is the source version the intent was derived from; never zero.
	Version SourceVersion
}

// envelopeFields are the members an envelope may have. Anything else is
// rejected: a field this version does not understand might have been meant to
// change what is sent, and guessing is not allowed.
var envelopeFields = []string{"v", "account", "action", "target", "request", "occurrence", "source", "reply_to", "not_before", "expires_at"}

var sourceFields = []string{"id", "version"}

// ParseEnvelope validates one intent message and returns it in canonical
// form. It is strict: the message must be at most MaxEnvelopeBytes of valid
// UTF-8 holding exactly one JSON object with no duplicate member names (at any
// depth) and no unknown members (at the top level or in source), where
//
//   - v is required and is the number 1;
//   - account is a required string of 1-128 bytes without control characters;
//   - action is a required string matching [a-z][a-z0-9_]{0,31};
//   - target is an optional string of at most 1024 bytes without control
//     characters ("" and absent mean the same);
//   - request is a required JSON object; if it has a top-level "text" member,
//     that member must be a string and is replaced by NormalizeText(text);
//   - occurrence is an optional string of at most 128 bytes without control
//     characters ("" and absent mean the same);
//   - source is an optional object with exactly a non-empty "id" (at most
//     2048 bytes after CanonicalSourceID, no control characters) and a
//     "version" that is a valid, non-zero sv1: SourceVersion;
//   - reply_to is an optional delivery key in its text form (dk1:...), of
//     another intent; with it, target must be empty (invalid_target).
//
// Optional members may be absent but not null. Every failure is a
// *RejectError whose Reason is in AllReasons (never subject_mismatch,
// unknown_account, invalid_header, unstorable or misdirected_reply, which only ingest can
// decide). On success ParseEnvelope(e.Canonical()) returns an Envelope equal
// to e, with the same DeliveryKey.
func ParseEnvelope(data []byte) (Envelope, error) {
	if len(data) > MaxEnvelopeBytes {
		return Envelope{}, reject(ReasonTooLarge, fmt.Sprintf("message is %d bytes; the limit is %d", len(data), MaxEnvelopeBytes))
	}
	if i := invalidUTF8At(data); i >= 0 {
		return Envelope{}, reject(ReasonInvalidUTF8, fmt.Sprintf("byte 0x%02x at byte %d is not valid UTF-8", data[i], i))
	}
	root, err := canonicaljson.Parse(data)
	if err != nil {
		return Envelope{}, rejectJSON(err)
	}
	if root.Kind != canonicaljson.KindObject {
		return Envelope{}, reject(ReasonNotObject, "the message is "+canonicaljson.Article(root.Kind)+", not an object")
	}
	return envelopeFromObject(&root)
}

// NewEnvelope builds and validates an envelope from its parts, with exactly
// the rules and canonicalization of ParseEnvelope (request is the JSON text of
// the request object; source may be nil). It is what a Go producer uses
// instead of assembling JSON by hand. Failures are *RejectError values, as
// from ParseEnvelope; strings that are not valid UTF-8 are invalid_utf8. An empty
// account or action is a field not given (missing_field): Go has no other way to leave
// one out, and a producer that forgot it learns so by name.
func NewEnvelope(account, action, target string, request []byte, occurrence string, source *Source) (Envelope, error) {
	for _, f := range []struct{ name, value string }{
		{"account", account}, {"action", action}, {"target", target}, {"occurrence", occurrence},
	} {
		if !utf8.ValidString(f.value) {
			return Envelope{}, reject(ReasonInvalidUTF8, f.name+" is not valid UTF-8")
		}
	}
	if source != nil && !utf8.ValidString(source.ID) {
		return Envelope{}, reject(ReasonInvalidUTF8, "source.id is not valid UTF-8")
	}
	// The request sits one level inside the envelope object, and the
	// envelope's canonical form must itself parse within MaxDepth.
	req, err := canonicaljson.ParseAt(request, 1)
	if err != nil {
		var je *JSONError
		if errors.As(err, &je) {
			err = &JSONError{Err: je.Err, Offset: -1, Path: "$.request" + strings.TrimPrefix(je.Path, "$"), Detail: je.Detail}
		}
		return Envelope{}, rejectJSON(err)
	}
	str := func(s string) canonicaljson.Value {
		return canonicaljson.Value{Kind: canonicaljson.KindString, Str: s, Offset: -1}
	}
	// A Go caller cannot leave a field out, only give its zero value: an empty account or
	// action is the member left out, missing_field as from an envelope without it.
	var members []canonicaljson.Member
	if account != "" {
		members = append(members, canonicaljson.Member{Key: "account", Val: str(account)})
	}
	if action != "" {
		members = append(members, canonicaljson.Member{Key: "action", Val: str(action)})
	}
	members = append(members,
		canonicaljson.Member{Key: "occurrence", Val: str(occurrence)},
		canonicaljson.Member{Key: "request", Val: req},
	)
	if source != nil {
		members = append(members, canonicaljson.Member{Key: "source", Val: canonicaljson.Value{Kind: canonicaljson.KindObject, Offset: -1, Obj: []canonicaljson.Member{
			{Key: "id", Val: str(source.ID)},
			{Key: "version", Val: str(source.Version.String())},
		}}})
	}
	members = append(members,
		canonicaljson.Member{Key: "target", Val: str(target)},
		canonicaljson.Member{Key: "v", Val: canonicaljson.Value{Kind: canonicaljson.KindNumber, Num: EnvelopeVersion, Offset: -1}},
	)
	return envelopeFromObject(&canonicaljson.Value{Kind: canonicaljson.KindObject, Obj: members, Offset: -1})
}

// invalidUTF8At returns the offset of the first byte that is not part of a
// valid UTF-8 sequence, or -1.
func invalidUTF8At(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// DeliveryKey returns the envelope's delivery key, computed from account,
// action, target, the canonical request, occurrence and reply_to when set;
// never from source.
func (e Envelope) DeliveryKey() DeliveryKey {
	return deliveryKey(e.Account, e.Action, e.Target, e.Request, e.Occurrence, e.ReplyTo)
}

// InReplyTo returns e answering the intent whose delivery key is parent (a
// reply, or the next post of a thread): what a Go producer uses, as NewEnvelope
// has no reply_to parameter. e must have no target (invalid_target), and
// parent must not be zero or e's own key.
func (e Envelope) InReplyTo(parent DeliveryKey) (Envelope, error) {
	switch {
	case e.Target != "":
		return Envelope{}, reject(ReasonInvalidTarget, "reply_to and target are both given; a reply's target is its parent's object")
	case parent.IsZero():
		return Envelope{}, reject(ReasonInvalidTarget, "reply_to is the zero key")
	}
	e.ReplyTo = parent
	if e.DeliveryKey() == parent {
		return Envelope{}, reject(ReasonInvalidTarget, "reply_to is the intent's own key")
	}
	return e, nil
}

// Text returns the request's normalized top-level "text" and true, or ""
// and false when the request has no top-level text.
func (e Envelope) Text() (string, bool) {
	req, err := canonicaljson.Parse(e.Request)
	if err != nil || req.Kind != canonicaljson.KindObject {
		return "", false
	}
	t, ok := req.Member("text")
	if !ok || t.Kind != canonicaljson.KindString {
		return "", false
	}
	return t.Str, true
}

// TextHash returns NewTextHash of the request's top-level text and true, or
// the zero TextHash and false when there is no text. Empty text is text: it
// has a hash and reports true; whether it takes part in the duplicate-text
// window is the caller's policy.
func (e Envelope) TextHash() (TextHash, bool) {
	t, ok := e.Text()
	if !ok {
		return TextHash{}, false
	}
	return NewTextHash(t), true
}

// Canonical returns the whole envelope as RFC 8785 canonical JSON, with
// target and occurrence always present (as "" when empty) and source,
// reply_to, not_before and expires_at present only when set. ParseEnvelope(e.Canonical()) yields an Envelope equal to e.
// It is the form to store and to republish.
func (e Envelope) Canonical() []byte {
	b := make([]byte, 0, 160+len(e.Account)+len(e.Target)+len(e.Request)+len(e.Occurrence))
	b = append(b, `{"account":`...)
	b = canonicaljson.AppendString(b, e.Account)
	b = append(b, `,"action":`...)
	b = canonicaljson.AppendString(b, e.Action)
	if !e.ExpiresAt.IsZero() {
		b = append(b, `,"expires_at":`...)
		b = canonicaljson.AppendString(b, FormatTime(e.ExpiresAt))
	}
	if !e.NotBefore.IsZero() {
		b = append(b, `,"not_before":`...)
		b = canonicaljson.AppendString(b, FormatTime(e.NotBefore))
	}
	b = append(b, `,"occurrence":`...)
	b = canonicaljson.AppendString(b, e.Occurrence)
	if !e.ReplyTo.IsZero() {
		b = append(b, `,"reply_to":`...)
		b = canonicaljson.AppendString(b, e.ReplyTo.String())
	}
	b = append(b, `,"request":`...)
	if len(e.Request) == 0 {
		b = append(b, "{}"...)
	} else {
		b = append(b, e.Request...)
	}
	if e.Source != nil {
		b = append(b, `,"source":{"id":`...)
		b = canonicaljson.AppendString(b, e.Source.ID)
		b = append(b, `,"version":`...)
		b = canonicaljson.AppendString(b, e.Source.Version.String())
		b = append(b, '}')
	}
	b = append(b, `,"target":`...)
	b = canonicaljson.AppendString(b, e.Target)
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(e.V), 10)
	return append(b, '}')
}

// Equal reports whether e and o are the same envelope, field by field
// (Request by bytes, Source by value).
func (e Envelope) Equal(o Envelope) bool {
	if e.V != o.V || e.Account != o.Account || e.Action != o.Action || e.Target != o.Target ||
		e.Occurrence != o.Occurrence || e.ReplyTo != o.ReplyTo || !bytes.Equal(e.Request, o.Request) ||
		!e.NotBefore.Equal(o.NotBefore) || !e.ExpiresAt.Equal(o.ExpiresAt) {
		return false
	}
	if e.Source == nil || o.Source == nil {
		return e.Source == nil && o.Source == nil
	}
	return *e.Source == *o.Source
}
