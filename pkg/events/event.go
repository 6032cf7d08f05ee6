package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/identity"
)

// Version is the version of the event payload this package writes and reads.
const Version = 1

// Event is one transition of one intent, as published on ATMOST_EVENTS. From is "" for the
// creation of the intent. The attempt fields are set when the transition concerns an attempt.
type Event struct {
	V           int                    `json:"v"`
	ID          ID                     `json:"id"`
	DeliveryKey identity.DeliveryKey   `json:"delivery_key"`
	Seq         int64                  `json:"seq"`
	Account     string                 `json:"account"`
	From        atmosttype.State       `json:"from"`
	To          atmosttype.State       `json:"to"`
	Reason      atmosttype.Reason      `json:"reason"`
	Attempt     *identity.AttemptToken `json:"attempt,omitempty"`
	Epoch       int64                  `json:"epoch,omitempty"`
	Generation  int64                  `json:"generation,omitempty"`
	Actor       string                 `json:"actor"`
	At          time.Time              `json:"at"`
}

// Subject is the subject the event is published on.
func (e Event) Subject() string { return EventSubject(string(e.To), e.Account) }

// Key is the event's delivery key under the name a receipt and an outcome give it
// (client.Receipt.Key, client.Outcome.Key), so a producer matches the three by one name. The
// field stays DeliveryKey, and the JSON field delivery_key, as the event schema says.
func (e Event) Key() identity.DeliveryKey { return e.DeliveryKey }

// Validate reports the first way e is not a well-formed event.
func (e Event) Validate() error {
	switch {
	case e.V != Version:
		return fmt.Errorf("events: version %d, want %d", e.V, Version)
	case !e.ID.derives(e.DeliveryKey, e.Seq):
		return fmt.Errorf("events: id %q does not derive from the delivery key and seq %d", e.ID, e.Seq)
	case e.Account == "":
		return errors.New("events: no account")
	case e.From != "" && !e.From.Valid(), !e.To.Valid():
		return fmt.Errorf("events: %q -> %q is not between states", e.From, e.To)
	case (e.From == "") != (e.Seq == 1):
		return errors.New("events: only the first transition (seq 1) has no from state")
	case e.Reason == "" || e.Actor == "":
		return errors.New("events: reason and actor are required")
	case e.At.IsZero():
		return errors.New("events: no time")
	}
	return nil
}

// Marshal returns the event's JSON payload, refusing an event that does not validate. The
// payload is what encoding/json writes for Event (TestMarshalWritesWhatEncodingJSONWrites),
// appended field by field: every transition is encoded at each publication, and encoding it
// by reflection was a twentieth of the pipeline's Go CPU.
func (e Event) Marshal() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	b := make([]byte, 0, 400+len(e.Account)+len(e.Actor))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(e.V), 10)
	b = appendField(b, "id", string(e.ID))
	b = append(b, `,"delivery_key":"`...)
	b, _ = e.DeliveryKey.AppendText(b) // hex: nothing to escape
	b = append(b, `","seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = appendField(b, "account", e.Account)
	b = appendField(b, "from", string(e.From))
	b = appendField(b, "to", string(e.To))
	b = appendField(b, "reason", string(e.Reason))
	if e.Attempt != nil {
		b = append(b, `,"attempt":"`...)
		b, _ = e.Attempt.AppendText(b)
		b = append(b, '"')
	}
	if e.Epoch != 0 {
		b = append(b, `,"epoch":`...)
		b = strconv.AppendInt(b, e.Epoch, 10)
	}
	if e.Generation != 0 {
		b = append(b, `,"generation":`...)
		b = strconv.AppendInt(b, e.Generation, 10)
	}
	b = appendField(b, "actor", e.Actor)
	b = append(b, `,"at":"`...)
	b, err := e.At.AppendText(b) // RFC 3339 with sub-second precision, as MarshalJSON writes it
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return append(b, '"', '}'), nil
}

// appendField appends ,"name":value with value quoted as encoding/json quotes a string: as it
// is when it is printable ASCII that needs no escape (what atmost's own fields are), by
// encoding/json itself otherwise (an account, an actor of any text).
func appendField(b []byte, name, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(value) // a string always encodes
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, value...)
	return append(b, '"')
}

// Unmarshal parses and validates an event payload. Unknown fields are refused: a consumer of
// version 1 must not silently drop what a later version added.
func Unmarshal(data []byte) (Event, error) {
	var e Event
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("events: %w", err)
	}
	if dec.More() {
		return Event{}, errors.New("events: trailing data after the event")
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}
