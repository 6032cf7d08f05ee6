package events

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/atmost/atmost/pkg/identity"
)

// WorkItem asks the dispatcher pool to work one intent. It is published on ATMOST_DISPATCH for
// every transition into pending, with Nats-Msg-Id = "work:" + the event id. A work item is only
// a hint: the ledger decides whether there is anything to do (an intent that is no longer
// pending is acknowledged and ignored).
type WorkItem struct {
	V           int                  `json:"v"`
	DeliveryKey identity.DeliveryKey `json:"delivery_key"`
	Account     string               `json:"account"`
	Event       ID                   `json:"event"`
	// Follows says the work item was published only after JetStream acknowledged Event and
	// every earlier event of its intent: the dispatcher that takes it finds them in the stream
	// already and leaves what the outbox still holds of them to the writer that published
	// them, rather than publishing them again. A work item without it (the sweeper's, the
	// slow path's) promises nothing of the kind.
	Follows bool `json:"follows,omitempty"`
}

// Acknowledged is the sequence up to which the events of the work item's intent were in the
// stream before it was published: Event's sequence where Follows, 0 otherwise.
func (w WorkItem) Acknowledged() int64 {
	if !w.Follows {
		return 0
	}
	_, seq, err := ParseID(string(w.Event))
	if err != nil {
		return 0
	}
	return seq
}

// MsgID is the Nats-Msg-Id the work item is published with.
func (w WorkItem) MsgID() string { return "work:" + string(w.Event) }

// RepublishMsgID is the Nats-Msg-Id of a work item the sweeper publishes again for an intent
// whose work may have been lost. It differs from MsgID, which JetStream would drop as a
// duplicate inside its window, and from one sweep round to the next; sweepers of the same
// round share it, so JetStream keeps one of their copies.
func (w WorkItem) RepublishMsgID(round int64) string {
	return fmt.Sprintf("%s:sweep:%d", w.MsgID(), round)
}

// ReplyMsgID is the Nats-Msg-Id of a work item the relay publishes for a reply that waits for
// its parent, when the parent's transition parent (its publication, or its end without one) is
// relayed. It differs from MsgID and from one parent transition to the next; relays that publish
// the same transition share it, so JetStream keeps one of their copies.
func (w WorkItem) ReplyMsgID(parent ID) string { return w.MsgID() + ":parent:" + string(parent) }

// Subject is the subject the work item is published on.
func (w WorkItem) Subject() string { return DispatchSubject(w.Account) }

// Marshal encodes the work item as encoding/json would, by hand: every pending transition has
// one, and reflection cost it eight allocations where this takes one.
func (w WorkItem) Marshal() []byte {
	b := make([]byte, 0, 200+len(w.Account))
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(w.V), 10)
	b = append(b, `,"delivery_key":"`...)
	b, _ = w.DeliveryKey.AppendText(b) // hex: nothing to escape
	b = append(b, '"')
	b = appendField(b, "account", w.Account)
	b = appendField(b, "event", string(w.Event))
	if w.Follows {
		b = append(b, `,"follows":true`...)
	}
	return append(b, '}')
}

// UnmarshalWorkItem parses a work item payload.
func UnmarshalWorkItem(data []byte) (WorkItem, error) {
	var w WorkItem
	if err := json.Unmarshal(data, &w); err != nil {
		return WorkItem{}, fmt.Errorf("events: work item: %w", err)
	}
	if w.V != Version || w.Account == "" || w.DeliveryKey.IsZero() {
		return WorkItem{}, fmt.Errorf("events: work item is not version %d with a key and an account", Version)
	}
	if key, _, err := ParseID(string(w.Event)); err != nil || key != w.DeliveryKey {
		return WorkItem{}, fmt.Errorf("events: work item's event %q does not belong to its key", w.Event)
	}
	return w, nil
}
