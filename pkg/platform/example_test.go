package platform_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// A role opens an account's adapter through the registry by the platform name the account's
// configuration gives, and the adapter renders an intent to the exact bytes it will send. The
// Prepared's hash is what the ledger binds to the attempt: the same intent renders to the same
// bytes and the same hash, so what was authorized is what is sent.
func ExampleRegistry_Open() {
	registry := platform.Registry{sim.Name: sim.Open}
	adapter, err := registry.Open(platform.Account{
		ID:       "news-bot",
		Platform: sim.Name,
		Settings: json.RawMessage(`{"url": "http://127.0.0.1:9300"}`),
	})
	if err != nil {
		panic(err)
	}
	e, err := identity.ParseEnvelope([]byte(`{"v":1,"account":"news-bot","action":"post","request":{"text":"Hello, world"}}`))
	if err != nil {
		panic(err)
	}
	text, _ := e.Text()
	request := platform.Request{Key: e.DeliveryKey(), Account: e.Account, Action: e.Action, Target: e.Target, Request: e.Request, Text: text}
	p, err := adapter.Prepare(request)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Method, p.URL)
	fmt.Println(p.Header["Idempotency-Key"][0])
	fmt.Println(string(p.Body))
	fmt.Println(hex.EncodeToString(p.Hash[:]))
	again, err := adapter.Prepare(request)
	if err != nil {
		panic(err)
	}
	fmt.Println(again.Hash == p.Hash)

	_, err = registry.Open(platform.Account{ID: "news-bot", Platform: "mastodon"})
	fmt.Println(errors.Is(err, platform.ErrUnknownPlatform))
	// Output:
	// POST http://127.0.0.1:9300/v1/accounts/news-bot/post
	// dk1:d07268b829d263a5e5a76d1aa6bc5bfe9508c97a042dce1064e2a8f6119195d7
	// {"action":"post","request":{"text":"Hello, world"},"target":"","text":"Hello, world"}
	// 6eb1908cf45da6d395e8e41611e8da559ca85a8919634605f708a4d1bcda94ab
	// true
	// true
}

// The hash covers the method, the URL, every header and the body: a request changed by one
// byte after it was authorized no longer matches.
func ExampleNewPrepared() {
	header := map[string][]string{"Content-Type": {"application/json"}}
	a := platform.NewPrepared(platform.Request{}, "POST", "https://hooks.example/notify", header, []byte(`{"text":"Hello"}`))
	b := platform.NewPrepared(platform.Request{}, "POST", "https://hooks.example/notify", header, []byte(`{"text":"Hello!"}`))
	fmt.Println(a.Hash == b.Hash)
	// Output:
	// false
}
