package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	From        string                 `json:"from"`
	To          string                 `json:"to"`
	Reason      string                 `json:"reason"`
	Attempt     *identity.AttemptToken `json:"attempt,omitempty"`
	Epoch       int64                  `json:"epoch,omitempty"`
	Generation  int64                  `json:"generation,omitempty"`
	Actor       string                 `json:"actor"`
	At          time.Time              `json:"at"`
}

// The six states an event may name, as the ledger spells them.
var states = map[string]bool{
	"pending": true, "authorized": true, "published": true, "failed": true, "indeterminate": true, "parked": true,
}

// Subject is the subject the event is published on.
func (e Event) Subject() string { return EventSubject(e.To, e.Account) }

// Validate reports the first way e is not a well-formed event.
func (e Event) Validate() error {
	switch {
	case e.V != Version:
		return fmt.Errorf("events: version %d, want %d", e.V, Version)
	case e.ID != NewID(e.DeliveryKey, e.Seq):
		return fmt.Errorf("events: id %q does not derive from the delivery key and seq %d", e.ID, e.Seq)
	case e.Account == "":
		return errors.New("events: no account")
	case e.From != "" && !states[e.From], !states[e.To]:
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

// Marshal returns the event's JSON payload, refusing an event that does not validate.
func (e Event) Marshal() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(e)
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
