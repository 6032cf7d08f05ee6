package events

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/atmost/atmost/pkg/identity"
)

// RejectVersion is the version of the reject payload this package writes and reads.
const RejectVersion = 1

// Reject is one message ingest refused, as published on atmost.rejected.<reason> (schema
// reject.schema.json beside this file). It names the refused message the way its producer knows
// it: the stream sequence JetStream's acknowledgement gave the producer, and the producer's own
// Nats-Msg-Id. Its ID, published as the reject's Nats-Msg-Id, is stable per refused message,
// so a redelivery of the refused message publishes nothing new; consumers dedupe on it.
//
// Detail, Subject and MsgID carry untrusted bytes; each is as it came when it is UTF-8
// without NUL, and otherwise "base64:" and the standard base64 of its bytes (the ledger's
// stored-text form, ledger.StoredText), so any bytes survive JSON.
type Reject struct {
	V      int             `json:"v"`
	ID     string          `json:"id"`
	Reason identity.Reason `json:"reason"`
	// Detail says which field and, where known, which byte; never the payload.
	Detail string `json:"detail"`
	// Stream and StreamSeq name the refused message: ATMOST_INTENTS and the sequence of the
	// producer's publish acknowledgement.
	Stream    string `json:"stream"`
	StreamSeq uint64 `json:"stream_seq"`
	// Subject is the subject the refused message came on (the reject's own is
	// RejectSubject(Reason)).
	Subject string `json:"subject"`
	// MsgID is the refused message's Nats-Msg-Id header; "" (absent) when it had none.
	MsgID string `json:"msg_id,omitempty"`
	// Account and DeliveryKey are set when the envelope itself was valid and the message was
	// refused for what surrounds it (subject_mismatch, invalid_key_header, key_mismatch,
	// unknown_account, or an intent the database refused: unstorable): the envelope's account
	// and the key computed from it.
	Account     string                `json:"account,omitempty"`
	DeliveryKey *identity.DeliveryKey `json:"delivery_key,omitempty"`
	// Size and SHA256 are the whole body's; Raw is its first bytes, at most the ledger's
	// MaxRejectRaw, none for unstorable; Truncated is whether Raw is shorter than Size.
	Size      int    `json:"size"`
	SHA256    string `json:"sha256"`
	Raw       []byte `json:"raw"`
	Truncated bool   `json:"truncated"`
}

// RejectID is the id of the reject of the message at seq on stream: "reject:<stream>:<seq>".
func RejectID(stream string, seq uint64) string {
	return fmt.Sprintf("reject:%s:%d", stream, seq)
}

// Validate reports the first way r is not a well-formed reject.
func (r Reject) Validate() error {
	switch {
	case r.V != RejectVersion:
		return fmt.Errorf("events: reject version %d, want %d", r.V, RejectVersion)
	case !r.Reason.Valid():
		return fmt.Errorf("events: reject reason %q is not one of identity.AllReasons", r.Reason)
	case r.Stream == "" || r.StreamSeq == 0:
		return errors.New("events: a reject names the stream and sequence of the refused message")
	case r.ID != RejectID(r.Stream, r.StreamSeq):
		return fmt.Errorf("events: reject id %q does not derive from %s and %d", r.ID, r.Stream, r.StreamSeq)
	case (r.Account == "") != (r.DeliveryKey == nil):
		return errors.New("events: a reject names both the account and the delivery key, or neither")
	case r.Size < len(r.Raw) || r.Truncated != (len(r.Raw) < r.Size):
		return fmt.Errorf("events: reject of %d bytes holds %d, truncated %t", r.Size, len(r.Raw), r.Truncated)
	}
	if b, err := hex.DecodeString(r.SHA256); err != nil || len(b) != 32 || hex.EncodeToString(b) != r.SHA256 {
		return fmt.Errorf("events: reject sha256 %q is not 64 lower-case hex digits", r.SHA256)
	}
	return nil
}

// Marshal returns the reject's JSON payload, refusing a reject that does not validate.
func (r Reject) Marshal() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if r.Raw == nil {
		r.Raw = []byte{} // "raw": "", never null
	}
	return json.Marshal(r)
}

// UnmarshalReject parses and validates a reject payload. Unknown fields are refused: a consumer
// of version 1 must not silently drop what a later version added.
func UnmarshalReject(data []byte) (Reject, error) {
	var r Reject
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Reject{}, fmt.Errorf("events: reject: %w", err)
	}
	if dec.More() {
		return Reject{}, errors.New("events: reject: trailing data")
	}
	if err := r.Validate(); err != nil {
		return Reject{}, err
	}
	return r, nil
}
