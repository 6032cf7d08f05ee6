package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/streams"
	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
)

// An intent's delivery key and subject are known before anything is published: the key is
// derived from its content, so the same intent, spelt any way, always has the same one.
func ExampleIntent_Envelope() {
	env, err := client.Intent{Account: "news-bot", Action: "post", Request: map[string]any{"text": "Hello, world"}}.Envelope()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(env.DeliveryKey())
	fmt.Println(events.IntentSubject(env.Account))
	fmt.Println(string(env.Canonical()))

	// What ingest would refuse, the client refuses first, with ingest's reason.
	_, err = client.Intent{Account: "news-bot", Action: "Post!", Request: map[string]any{}}.Envelope()
	var rej *identity.RejectError
	fmt.Println(errors.As(err, &rej), rej.Reason)
	// Output:
	// dk1:d07268b829d263a5e5a76d1aa6bc5bfe9508c97a042dce1064e2a8f6119195d7
	// atmost.intent.news-bot
	// {"account":"news-bot","action":"post","occurrence":"","request":{"text":"Hello, world"},"target":"","v":1}
	// true invalid_action
}

// Publishing the same intent twice stores one message: the second is a duplicate of the
// first, by its delivery key. Here against an embedded NATS server with atmost's streams.
func ExampleClient_Publish() {
	nc, stop := embeddedNATS()
	defer stop()
	c, err := client.New(nc, client.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	intent := client.Intent{Account: "news-bot", Action: "post", Request: map[string]any{"text": "Hello, world"}}
	for range 2 {
		r, err := c.Publish(ctx, intent)
		if errors.Is(err, client.ErrMaybePublished) {
			continue // no acknowledgement: publishing it again is safe
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Key, r.Stream, r.Seq, r.Duplicate)
	}
	// Output:
	// dk1:d07268b829d263a5e5a76d1aa6bc5bfe9508c97a042dce1064e2a8f6119195d7 ATMOST_INTENTS 1 false
	// dk1:d07268b829d263a5e5a76d1aa6bc5bfe9508c97a042dce1064e2a8f6119195d7 ATMOST_INTENTS 1 true
}

// A producer that must know its intent was taken publishes until JetStream acknowledges it:
// "may have been published" is answered by publishing the same intent again.
func ExampleErrMaybePublished() {
	nc, stop := embeddedNATS()
	defer stop()
	c, err := client.New(nc, client.Config{AckTimeout: 2 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	intent := client.Intent{Account: "news-bot", Action: "like", Target: "at://did:plc:abc/app.bsky.feed.post/3k", Request: map[string]any{}}
	for {
		r, err := c.Publish(ctx, intent)
		if errors.Is(err, client.ErrMaybePublished) && ctx.Err() == nil {
			time.Sleep(time.Second)
			continue
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("stored as message", r.Seq)
		return
	}
	// Output: stored as message 1
}

// Many intents at once: PublishAll keeps up to Config.MaxInFlight acknowledgements
// outstanding, and returns one result per intent, in order.
func ExampleClient_PublishAll() {
	nc, stop := embeddedNATS()
	defer stop()
	c, err := client.New(nc, client.Config{MaxInFlight: 256})
	if err != nil {
		log.Fatal(err)
	}
	var intents []client.Intent
	for i := range 1000 {
		intents = append(intents, client.Intent{Account: "news-bot", Action: "post", Request: map[string]any{"text": fmt.Sprint("post ", i)}})
	}
	stored := 0
	for _, r := range c.PublishAll(context.Background(), intents) {
		if r.Err == nil {
			stored++
		}
	}
	fmt.Println(stored, "stored")
	// Output: 1000 stored
}

// Learning the outcome, from the outcome service the ingest role serves: Await returns once
// the intent is published, failed (proven not sent) or parked (a person decides), or, given
// the message's sequence, refused by ingest.
func ExampleClient_Await() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	c, err := client.New(nc, client.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := c.Publish(ctx, client.Intent{Account: "news-bot", Action: "post", Request: map[string]any{"text": "Hello, world"}})
	if err != nil {
		log.Fatal(err)
	}
	o, err := c.Await(ctx, r.Account, r.Key, client.Seq(r.Seq))
	if err != nil {
		log.Fatal(err)
	}
	switch {
	case o.Rejected != nil:
		fmt.Println("refused by ingest:", o.Rejected.Reason, o.Rejected.Detail)
	case o.State == atmosttype.Published:
		fmt.Println("posted as", o.ObjectID)
	case o.State == atmosttype.Failed:
		fmt.Println("not sent:", o.Reason, "retry:", o.Retry)
	case o.State == atmosttype.Parked:
		fmt.Println("a person decides:", o.Reason)
	}
}

// A downstream service that follows what was published for one account: started again with
// the same durable name, it resumes after the last event it handled.
func ExampleClient_Follow() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	c, err := client.New(nc, client.Config{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	err = c.Follow(ctx, client.FollowConfig{Durable: "billing", Accounts: []string{"news-bot"}, States: []atmosttype.State{atmosttype.Published}},
		func(ctx context.Context, e events.Event) error {
			fmt.Println(e.ID, e.DeliveryKey, e.Reason) // e.ID is stable: dedupe on it in your own store
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
}

// The subjects a follower's filter becomes: a wildcard is written as one, and an account of any
// spelling is its subject token.
func ExampleFollowConfig_Filters() {
	f, err := client.FollowConfig{Accounts: []string{"news-bot", "ops.team"}}.Filters()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f)
	f, err = client.FollowConfig{States: []atmosttype.State{atmosttype.Parked, atmosttype.Indeterminate}}.Filters()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f)
	// Output:
	// [atmost.event.*.news-bot atmost.event.*.~b3BzLnRlYW0]
	// [atmost.event.indeterminate.* atmost.event.parked.*]
}

// embeddedNATS starts a NATS server with JetStream and atmost's streams, for the examples that
// run; stop shuts it down and removes its store.
func embeddedNATS() (*nats.Conn, func()) {
	dir, err := os.MkdirTemp("", "atmost-example-")
	if err != nil {
		log.Fatal(err)
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		log.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		log.Fatal("nats-server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	if err := streams.Ensure(context.Background(), nc, mustJetStream(nc), streams.Config{}); err != nil {
		log.Fatal(err)
	}
	return nc, func() {
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}
}

func mustJetStream(nc *nats.Conn) jetstream.JetStream {
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	return js
}
