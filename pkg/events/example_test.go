package events_test

import (
	"fmt"
	"time"

	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
)

// postKey is the delivery key of the intent the examples follow.
func postKey() identity.DeliveryKey {
	e, err := identity.ParseEnvelope([]byte(`{"v":1,"account":"news-bot","action":"post","request":{"text":"Hello, world"}}`))
	if err != nil {
		panic(err)
	}
	return e.DeliveryKey()
}

// The creation of an intent, its first event. An event's id is its intent's delivery key and
// the transition's sequence number, so a consumer that sees one transition twice (JetStream
// redelivers) knows it is the same one. Its subject carries the state the intent entered and
// the account's token, for consumers that filter on either.
func ExampleEvent() {
	e := events.Event{
		V:           events.Version,
		ID:          events.NewID(postKey(), 1),
		DeliveryKey: postKey(),
		Seq:         1,
		Account:     "news-bot",
		From:        "",
		To:          "pending",
		Reason:      "submitted",
		Actor:       "ingest",
		At:          time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC),
	}
	fmt.Println(e.ID)
	fmt.Println(e.Subject())
	payload, err := e.Marshal()
	if err != nil {
		panic(err)
	}
	back, err := events.Unmarshal(payload)
	if err != nil {
		panic(err)
	}
	fmt.Println(back.ID == e.ID, back.To)
	// Output:
	// ev1:d07268b829d263a5e5a76d1aa6bc5bfe9508c97a042dce1064e2a8f6119195d7:1
	// atmost.event.pending.news-bot
	// true pending
}

// An event id splits back into the delivery key and the sequence number.
func ExampleParseID() {
	k, seq, err := events.ParseID(string(events.NewID(postKey(), 1)))
	if err != nil {
		panic(err)
	}
	fmt.Println(k == postKey(), seq)
	// Output:
	// true 1
}

// The subjects of one account, and the filter of every transition into a state whatever the
// account.
func ExampleEventSubject() {
	fmt.Println(events.IntentSubject("news-bot"))
	fmt.Println(events.EventSubject("parked", "team.news bot"))
	fmt.Println(events.StateSubjects("indeterminate"))
	fmt.Println(events.RejectSubject(identity.ReasonUnknownField))
	// Output:
	// atmost.intent.news-bot
	// atmost.event.parked.~dGVhbS5uZXdzIGJvdA
	// atmost.event.indeterminate.*
	// atmost.rejected.unknown_field
}
