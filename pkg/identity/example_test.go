package identity_test

import (
	"errors"
	"fmt"

	"github.com/atmost/atmost/pkg/identity"
)

// A producer's message is parsed into its canonical form, and its delivery key follows from
// the content alone: the same message published twice, with its members in another order and
// white space around its text, is the same intent.
func ExampleParseEnvelope() {
	first, err := identity.ParseEnvelope([]byte(`{"v": 1, "account": "news-bot", "action": "post",
		"request": {"text": "Hello, world"}}`))
	if err != nil {
		panic(err)
	}
	again, err := identity.ParseEnvelope([]byte(`{"request": {"text": "  Hello, world\r\n"},
		"action": "post", "account": "news-bot", "v": 1}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(first.DeliveryKey())
	fmt.Println(first.DeliveryKey() == again.DeliveryKey())
	fmt.Println(string(first.Canonical()))
	// Output:
	// dk1:d07268b829d263a5e5a76d1aa6bc5bfe9508c97a042dce1064e2a8f6119195d7
	// true
	// {"account":"news-bot","action":"post","occurrence":"","request":{"text":"Hello, world"},"target":"","v":1}
}

// A message the contract refuses names its reason from the closed list; nothing is repaired.
func ExampleParseEnvelope_rejected() {
	_, err := identity.ParseEnvelope([]byte(`{"v": 1, "account": "news-bot", "action": "post",
		"request": {"text": "Hello"}, "priority": "high"}`))
	var reject *identity.RejectError
	if errors.As(err, &reject) {
		fmt.Println(reject.Reason)
	}
	// Output:
	// unknown_field
}

// The same JSON value spelled two ways has one canonical form (RFC 8785): members sorted, no
// white space, numbers in their shortest exact spelling.
func ExampleCanonicalJSON() {
	out, err := identity.CanonicalJSON([]byte(`{"b": [1.0, 2e1, "x"], "a": {"z": true, "y": null}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(out))

	_, err = identity.CanonicalJSON([]byte(`{"n": 0.10000000000000001}`))
	fmt.Println(errors.Is(err, identity.ErrInexactNumber))
	// Output:
	// {"a":{"y":null,"z":true},"b":[1,20,"x"]}
	// true
}

// A delivery key travels as text (ATMOST_EVENTS, the operator's command line) and parses back
// to the same key.
func ExampleParseDeliveryKey() {
	e, err := identity.NewEnvelope("news-bot", "like", "at://did:plc:abc/app.bsky.feed.post/1", []byte(`{}`), "", nil)
	if err != nil {
		panic(err)
	}
	key, err := identity.ParseDeliveryKey(e.DeliveryKey().String())
	if err != nil {
		panic(err)
	}
	fmt.Println(key == e.DeliveryKey())

	_, err = identity.ParseDeliveryKey("dk1:XYZ")
	fmt.Println(errors.Is(err, identity.ErrMalformedIdentity))
	// Output:
	// true
	// true
}

// An account becomes one NATS subject token, whatever characters it holds.
func ExampleAccountToken() {
	fmt.Println(identity.AccountToken("news-bot"))
	fmt.Println(identity.AccountToken("team.news bot"))
	account, _ := identity.ParseAccountToken(identity.AccountToken("team.news bot"))
	fmt.Println(account)
	// Output:
	// news-bot
	// ~dGVhbS5uZXdzIGJvdA
	// team.news bot
}
