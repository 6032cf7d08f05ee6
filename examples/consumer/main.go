// Command consumer is an example of a downstream service that follows atmost's events with the
// Go client: a durable consumer on ATMOST_EVENTS, filtered by account and state, that prints
// one line per transition. Started again with the same -durable name, it resumes after the
// last event it printed. It needs a NATS server with atmost's streams; it needs no database.
//
//	go run ./examples/consumer -durable audit -account sim-1 -state published
//
// Its NATS server is -nats-url, else ATMOST_NATS_URL as atmost's own commands read it.
//
// It runs until interrupted, or until it printed -count events.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
)

func main() {
	natsURL := nats.DefaultURL
	if env := os.Getenv("ATMOST_NATS_URL"); env != "" {
		natsURL = env
	}
	url := flag.String("nats-url", natsURL, "the NATS server (default: $ATMOST_NATS_URL, else "+nats.DefaultURL+")")
	durable := flag.String("durable", "example-consumer", "the consumer's durable name: its position survives a restart")
	accounts := flag.String("account", "", "comma-separated accounts to follow (default: every account)")
	states := flag.String("state", "", "comma-separated states to follow (default: every state)")
	count := flag.Int("count", 0, "stop after this many events (0: run until interrupted)")
	flag.Parse()
	if flag.NArg() > 0 || *count < 0 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	cfg := client.FollowConfig{Durable: *durable, Accounts: list(*accounts), States: stateList(*states)}
	if err := run(ctx, *url, cfg, *count); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, url string, cfg client.FollowConfig, count int) error {
	nc, err := nats.Connect(url, nats.Name("atmost example consumer"), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	c, err := client.New(nc, client.Config{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	printed := 0
	return c.Follow(ctx, cfg, func(_ context.Context, e events.Event) error {
		// The id is stable per transition: a service with effects of its own dedupes on it.
		fmt.Printf("%s %s %s -> %s (%s) by %s\n", e.ID, e.Account, orNone(e.From), e.To, e.Reason, e.Actor)
		if printed++; count > 0 && printed >= count {
			cancel() // Follow acknowledges this event, then returns
		}
		return nil
	})
}

func stateList(s string) []atmosttype.State {
	var out []atmosttype.State
	for _, st := range list(s) {
		out = append(out, atmosttype.State(st))
	}
	return out
}

func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func orNone(state atmosttype.State) string {
	if state == "" {
		return "(new)"
	}
	return string(state)
}
