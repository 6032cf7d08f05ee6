// Command producer is an example of a producer: it publishes one post intent with atmost's Go
// client, publishing it again while its acknowledgement does not come (safe: the delivery key
// dedupes), then awaits its outcome from the outcome service that the ingest role serves, and
// prints it. It needs a NATS server with atmost's roles running (ATMOST_NATS_URL, as atmost's
// own commands read it); it needs no database.
//
//	go run ./examples/producer -account sim-1 -text "Hello, world"
//
// It exits 0 once the intent is published, 1 when it settled otherwise (failed, parked) or the
// timeout passed, 2 for a bad command line.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/client"
)

func main() {
	natsURL := nats.DefaultURL
	if env := os.Getenv("ATMOST_NATS_URL"); env != "" {
		natsURL = env
	}
	url := flag.String("nats-url", natsURL, "the NATS server (default: $ATMOST_NATS_URL, else "+nats.DefaultURL+")")
	account := flag.String("account", "", "the account to post as (required)")
	text := flag.String("text", "", "the text to post (required)")
	occurrence := flag.String("occurrence", "", "set to post the same text again as a new intent")
	timeout := flag.Duration("timeout", time.Minute, "how long to wait for the outcome")
	flag.Parse()
	if *account == "" || *text == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := run(ctx, *url, client.Intent{Account: *account, Action: "post", Request: map[string]any{"text": *text}, Occurrence: *occurrence}); err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string, intent client.Intent) error {
	nc, err := nats.Connect(url, nats.Name("atmost example producer"), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	c, err := client.New(nc, client.Config{})
	if err != nil {
		return err
	}

	var receipt client.Receipt
	for {
		receipt, err = c.Publish(ctx, intent)
		if errors.Is(err, client.ErrMaybePublished) && ctx.Err() == nil {
			fmt.Println("no acknowledgement; publishing again:", err)
			time.Sleep(time.Second)
			continue
		}
		if err != nil {
			return err // refused (an *identity.RejectError names the reason), or certainly not stored
		}
		break
	}
	fmt.Printf("published %s as message %d of %s (duplicate: %t)\n", receipt.Key, receipt.Seq, receipt.Stream, receipt.Duplicate)

	// With the message's sequence, a refusal by ingest (an account not configured) is an
	// outcome too, and Await returns instead of waiting for an intent that will never exist.
	o, err := c.Await(ctx, receipt.Account, receipt.Key, client.Seq(receipt.Seq))
	if err != nil {
		return fmt.Errorf("awaiting %s (last seen: %q): %w", receipt.Key, o.State, err)
	}
	if o.Rejected != nil {
		return fmt.Errorf("%s: %w", receipt.Key, o.Rejected) // its remedy, when an operator can fix it
	}
	fmt.Printf("%s %s (%s) %s\n", o.State, o.Reason, o.Retry, o.ObjectID)
	if o.State != atmosttype.Published {
		return fmt.Errorf("%s is %s: %s", o.Key, o.State, o.Reason)
	}
	return nil
}
