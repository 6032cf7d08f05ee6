package identity

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/atmost/atmost/pkg/identity/canonicaljson"
)

// rejectJSON maps a parse failure to its Reason. Numbers and nesting are a
// property of the request when they occur in it, and malformed JSON otherwise.
func rejectJSON(err error) error {
	var je *JSONError
	if !errors.As(err, &je) {
		return reject(ReasonMalformedJSON, err.Error())
	}
	detail := je.Detail + " at " + je.Path
	if je.Offset >= 0 {
		detail += " (byte " + strconv.Itoa(je.Offset) + ")"
	}
	switch {
	case errors.Is(je, ErrInvalidUTF8):
		return reject(ReasonInvalidUTF8, detail)
	case errors.Is(je, ErrDuplicateKey):
		return reject(ReasonDuplicateField, detail)
	case (errors.Is(je, ErrInexactNumber) || errors.Is(je, ErrTooDeep)) && inRequest(je.Path):
		return reject(ReasonInvalidRequest, je.Err.Error()+": "+detail)
	default:
		return reject(ReasonMalformedJSON, je.Err.Error()+": "+detail)
	}
}

func inRequest(path string) bool {
	rest, ok := strings.CutPrefix(path, "$.request")
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// byteAt renders " at byte N" for values that came from a message, and
// nothing for values that NewEnvelope assembled.
func byteAt(offset int) string {
	if offset < 0 {
		return ""
	}
	return " at byte " + strconv.Itoa(offset)
}

// firstUnknown returns the member of obj that is not in known and comes first
// in the message, so the detail names what the producer wrote first.
func firstUnknown(obj *canonicaljson.Value, known []string) *canonicaljson.Member {
	var first *canonicaljson.Member
	for i := range obj.Obj {
		m := &obj.Obj[i]
		isKnown := false
		for _, k := range known {
			if m.Key == k {
				isKnown = true
				break
			}
		}
		if !isKnown && (first == nil || m.Offset < first.Offset) {
			first = m
		}
	}
	return first
}

func envelopeFromObject(root *canonicaljson.Value) (Envelope, error) {
	if m := firstUnknown(root, envelopeFields); m != nil {
		return Envelope{}, reject(ReasonUnknownField, "unknown field "+quoteShort(m.Key)+byteAt(m.Offset))
	}
	e := Envelope{V: EnvelopeVersion}
	var err error
	if err = checkVersion(root); err != nil {
		return Envelope{}, err
	}
	if e.Account, err = stringField(root, "account", true, ReasonInvalidAccount, MaxAccountBytes); err != nil {
		return Envelope{}, err
	}
	if e.Action, err = actionField(root); err != nil {
		return Envelope{}, err
	}
	if e.Target, err = stringField(root, "target", false, ReasonInvalidTarget, MaxTargetBytes); err != nil {
		return Envelope{}, err
	}
	if e.Request, err = requestField(root); err != nil {
		return Envelope{}, err
	}
	if e.Occurrence, err = stringField(root, "occurrence", false, ReasonInvalidOccurrence, MaxOccurrenceBytes); err != nil {
		return Envelope{}, err
	}
	if e.Source, err = sourceField(root); err != nil {
		return Envelope{}, err
	}
	if e.ReplyTo, err = replyToField(root, e.Target); err != nil {
		return Envelope{}, err
	}
	if !e.ReplyTo.IsZero() && e.DeliveryKey() == e.ReplyTo {
		return Envelope{}, reject(ReasonInvalidTarget, "reply_to is the intent's own key")
	}
	if e.NotBefore, err = timeField(root, "not_before"); err != nil {
		return Envelope{}, err
	}
	if e.ExpiresAt, err = timeField(root, "expires_at"); err != nil {
		return Envelope{}, err
	}
	if !e.NotBefore.IsZero() && !e.ExpiresAt.IsZero() && !e.ExpiresAt.After(e.NotBefore) {
		return Envelope{}, reject(ReasonInvalidTime, "expires_at "+FormatTime(e.ExpiresAt)+" is not after not_before "+FormatTime(e.NotBefore))
	}
	if n := len(e.Canonical()); n > MaxEnvelopeBytes {
		return Envelope{}, reject(ReasonTooLarge, fmt.Sprintf("canonical form is %d bytes; the limit is %d", n, MaxEnvelopeBytes))
	}
	return e, nil
}

func checkVersion(root *canonicaljson.Value) error {
	v, ok := root.Member("v")
	if !ok {
		return reject(ReasonMissingField, `missing field "v"`)
	}
	if v.Kind != canonicaljson.KindNumber {
		return reject(ReasonUnsupportedVersion, "v must be the number 1, got "+canonicaljson.Article(v.Kind)+byteAt(v.Offset))
	}
	if v.Num != EnvelopeVersion {
		return reject(ReasonUnsupportedVersion, "v is "+string(canonicaljson.AppendNumber(nil, v.Num))+"; only 1 is supported"+byteAt(v.Offset))
	}
	return nil
}

// stringField reads a string member: required or optional (absent means ""),
// at most maxBytes long, without control characters; the empty string is
// refused only for required members.
func stringField(root *canonicaljson.Value, name string, required bool, reason Reason, maxBytes int) (string, error) {
	v, ok := root.Member(name)
	if !ok {
		if required {
			return "", reject(ReasonMissingField, "missing field "+strconv.Quote(name))
		}
		return "", nil
	}
	if v.Kind != canonicaljson.KindString {
		return "", reject(reason, name+" must be a string, got "+canonicaljson.Article(v.Kind)+byteAt(v.Offset))
	}
	if required && v.Str == "" {
		return "", reject(reason, name+" is empty"+byteAt(v.Offset))
	}
	if len(v.Str) > maxBytes {
		return "", reject(reason, fmt.Sprintf("%s is %d bytes; the limit is %d%s", name, len(v.Str), maxBytes, byteAt(v.Offset)))
	}
	if err := checkNoControl(name, v.Str, reason); err != nil {
		return "", err
	}
	return v.Str, nil
}

func checkNoControl(name, s string, reason Reason) error {
	for i, r := range s {
		if unicode.IsControl(r) {
			return reject(reason, fmt.Sprintf("%s has control character U+%04X at byte %d of the value", name, r, i))
		}
	}
	return nil
}

func actionField(root *canonicaljson.Value) (string, error) {
	s, err := stringField(root, "action", true, ReasonInvalidAction, MaxActionBytes)
	if err != nil {
		return "", err
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '_') {
			continue
		}
		return "", reject(ReasonInvalidAction, fmt.Sprintf("action %s does not match [a-z][a-z0-9_]{0,31} (byte %d of the value)", quoteShort(s), i))
	}
	return s, nil
}

func requestField(root *canonicaljson.Value) (json.RawMessage, error) {
	v, ok := root.Member("request")
	if !ok {
		return nil, reject(ReasonMissingField, `missing field "request"`)
	}
	if v.Kind != canonicaljson.KindObject {
		return nil, reject(ReasonInvalidRequest, "request must be an object, got "+canonicaljson.Article(v.Kind)+byteAt(v.Offset))
	}
	// Work on a shallow copy so the caller's tree is left as parsed.
	req := *v
	req.Obj = append([]canonicaljson.Member(nil), v.Obj...)
	for i := range req.Obj {
		m := &req.Obj[i]
		if m.Key != "text" {
			continue
		}
		if m.Val.Kind != canonicaljson.KindString {
			return nil, reject(ReasonInvalidRequest, "request.text must be a string, got "+canonicaljson.Article(m.Val.Kind)+byteAt(m.Val.Offset))
		}
		m.Val.Str = NormalizeText(m.Val.Str)
	}
	return canonicaljson.AppendCanonical(nil, &req), nil
}

func sourceField(root *canonicaljson.Value) (*Source, error) {
	v, ok := root.Member("source")
	if !ok {
		return nil, nil
	}
	if v.Kind != canonicaljson.KindObject {
		return nil, reject(ReasonInvalidSource, "source must be an object, got "+canonicaljson.Article(v.Kind)+byteAt(v.Offset))
	}
	if m := firstUnknown(v, sourceFields); m != nil {
		return nil, reject(ReasonUnknownField, "unknown field "+quoteShort(m.Key)+" in source"+byteAt(m.Offset))
	}
	id, ok := v.Member("id")
	if !ok {
		return nil, reject(ReasonMissingField, `missing field "source.id"`)
	}
	if id.Kind != canonicaljson.KindString {
		return nil, reject(ReasonInvalidSource, "source.id must be a string, got "+canonicaljson.Article(id.Kind)+byteAt(id.Offset))
	}
	canonicalID, err := CanonicalSourceID(id.Str)
	if err != nil {
		return nil, reject(ReasonInvalidSource, "source.id: "+err.Error()+byteAt(id.Offset))
	}
	if len(canonicalID) > MaxSourceIDBytes {
		return nil, reject(ReasonInvalidSource, fmt.Sprintf("source.id is %d bytes canonicalized; the limit is %d%s", len(canonicalID), MaxSourceIDBytes, byteAt(id.Offset)))
	}
	if err := checkNoControl("source.id", canonicalID, ReasonInvalidSource); err != nil {
		return nil, err
	}
	ver, ok := v.Member("version")
	if !ok {
		return nil, reject(ReasonMissingField, `missing field "source.version"`)
	}
	if ver.Kind != canonicaljson.KindString {
		return nil, reject(ReasonInvalidSource, "source.version must be a string, got "+canonicaljson.Article(ver.Kind)+byteAt(ver.Offset))
	}
	version, err := ParseSourceVersion(ver.Str)
	if err != nil {
		return nil, reject(ReasonInvalidSource, "source.version: "+err.Error()+byteAt(ver.Offset))
	}
	if version.IsZero() {
		return nil, reject(ReasonInvalidSource, "source.version is the zero version"+byteAt(ver.Offset))
	}
	return &Source{ID: canonicalID, Version: version}, nil
}

// replyToField reads reply_to: absent, or a delivery key in its text form; a
// reply's target is its parent's object, so target must then be empty.
func replyToField(root *canonicaljson.Value, target string) (DeliveryKey, error) {
	v, ok := root.Member("reply_to")
	if !ok {
		return DeliveryKey{}, nil
	}
	if v.Kind != canonicaljson.KindString {
		return DeliveryKey{}, reject(ReasonInvalidTarget, "reply_to must be a string, got "+canonicaljson.Article(v.Kind)+byteAt(v.Offset))
	}
	key, err := ParseDeliveryKey(v.Str)
	if err != nil {
		return DeliveryKey{}, reject(ReasonInvalidTarget, "reply_to: "+err.Error()+byteAt(v.Offset))
	}
	if key.IsZero() {
		return DeliveryKey{}, reject(ReasonInvalidTarget, "reply_to is the zero key"+byteAt(v.Offset))
	}
	if target != "" {
		return DeliveryKey{}, reject(ReasonInvalidTarget, "reply_to and target are both given; a reply's target is its parent's object"+byteAt(v.Offset))
	}
	return key, nil
}

// ValidateAccount applies the envelope's rule for account ids to an account an operator
// configures: 1 to MaxAccountBytes bytes of valid UTF-8 without control characters. The error
// is a *RejectError with ReasonInvalidAccount.
func ValidateAccount(account string) error {
	switch {
	case account == "":
		return reject(ReasonInvalidAccount, "account is empty")
	case len(account) > MaxAccountBytes:
		return reject(ReasonInvalidAccount, fmt.Sprintf("account is %d bytes; the limit is %d", len(account), MaxAccountBytes))
	case !utf8.ValidString(account):
		return reject(ReasonInvalidAccount, "account is not valid UTF-8")
	}
	return checkNoControl("account", account, ReasonInvalidAccount)
}

// timeField reads an optional RFC 3339 time member (absent means the zero time): in UTC,
// truncated to the microsecond, the precision the ledger stores.
func timeField(root *canonicaljson.Value, name string) (time.Time, error) {
	v, ok := root.Member(name)
	if !ok {
		return time.Time{}, nil
	}
	if v.Kind != canonicaljson.KindString {
		return time.Time{}, reject(ReasonInvalidTime, name+" must be an RFC 3339 string, got "+canonicaljson.Article(v.Kind)+byteAt(v.Offset))
	}
	t, err := time.Parse(time.RFC3339Nano, v.Str)
	if err != nil {
		return time.Time{}, reject(ReasonInvalidTime, name+" "+quoteShort(v.Str)+" is not an RFC 3339 time"+byteAt(v.Offset))
	}
	if t.Year() < 2000 {
		// The zero time means "none": a time this early is a mistake, never a schedule.
		return time.Time{}, reject(ReasonInvalidTime, name+" "+quoteShort(v.Str)+" is before the year 2000"+byteAt(v.Offset))
	}
	return t.UTC().Truncate(time.Microsecond), nil
}

// FormatTime is how an envelope writes not_before and expires_at: RFC 3339 in UTC, with as
// many fractional digits as it needs.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// CheckSchedule is the limit of the envelope's times that depends on the clock, which ingest
// applies when it stores the intent: not_before at most MaxScheduleAhead after now. A
// *RejectError (invalid_time) when it is further ahead.
func (e Envelope) CheckSchedule(now time.Time) error {
	if !e.NotBefore.IsZero() && e.NotBefore.After(now.Add(MaxScheduleAhead)) {
		return reject(ReasonInvalidTime, fmt.Sprintf("not_before %s is more than %s ahead", FormatTime(e.NotBefore), MaxScheduleAhead))
	}
	return nil
}

// WithSchedule returns e with the times given (the zero time: none), checked as ParseEnvelope
// checks them: it is how a Go producer sets them, since NewEnvelope takes the fields of the
// delivery key.
func (e Envelope) WithSchedule(notBefore, expiresAt time.Time) (Envelope, error) {
	str := func(t time.Time) canonicaljson.Value {
		return canonicaljson.Value{Kind: canonicaljson.KindString, Str: FormatTime(t), Offset: -1}
	}
	// Members in canonical order, as Member looks them up.
	root := canonicaljson.Value{Kind: canonicaljson.KindObject, Offset: -1}
	if !expiresAt.IsZero() {
		root.Obj = append(root.Obj, canonicaljson.Member{Key: "expires_at", Val: str(expiresAt)})
	}
	if !notBefore.IsZero() {
		root.Obj = append(root.Obj, canonicaljson.Member{Key: "not_before", Val: str(notBefore)})
	}
	var err error
	if e.NotBefore, err = timeField(&root, "not_before"); err != nil {
		return Envelope{}, err
	}
	if e.ExpiresAt, err = timeField(&root, "expires_at"); err != nil {
		return Envelope{}, err
	}
	if !e.NotBefore.IsZero() && !e.ExpiresAt.IsZero() && !e.ExpiresAt.After(e.NotBefore) {
		return Envelope{}, reject(ReasonInvalidTime, "expires_at "+FormatTime(e.ExpiresAt)+" is not after not_before "+FormatTime(e.NotBefore))
	}
	if n := len(e.Canonical()); n > MaxEnvelopeBytes {
		return Envelope{}, reject(ReasonTooLarge, fmt.Sprintf("canonical form is %d bytes; the limit is %d", n, MaxEnvelopeBytes))
	}
	return e, nil
}
