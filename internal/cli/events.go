package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/redact"
	"github.com/atmost/atmost/pkg/events"
)

// DefaultNATSURL is the NATS server events tail reads when ATMOST_NATS_URL is unset.
const DefaultNATSURL = nats.DefaultURL

// tailFlags are the flags of `atmost events tail`.
type tailFlags struct {
	subject, since, natsURL string
	limit                   int
	follow                  bool
}

func eventsCommand() *Command {
	var fl tailFlags
	return &Command{Name: "events", Summary: "events tail: the transitions on ATMOST_EVENTS, the last few or from a time, --follow for new ones",
		About: `Prints the transitions published on ATMOST_EVENTS, oldest first, one line each: time, subject,
delivery key, from -> to, reason, actor; with --json, each event's payload (the published
schema, pkg/events/event.schema.json), one per line. --subject narrows them to a filter inside
atmost.event.> (atmost.event.<state>.<account-token>: * matches one token, > the rest), e.g.
"atmost.event.parked.>". Without --since: the last --limit events that match. With --since (a
duration back from now, like 15m, or an RFC 3339 time): the events from then on, at most
--limit of them. --follow then keeps printing new events until interrupted; with --since it
prints every event from then on. Reads with an ordered consumer: nothing is acknowledged or
left behind on the server.`,
		Subs: []*Command{{Name: "tail", Summary: "the last events, or those from a time on",
			Flags: func(f *Flags) {
				f.String(&fl.subject, "subject", "FILTER", events.EventSubjects, "only events on subjects matching this filter")
				f.String(&fl.since, "since", "DURATION|TIME", "", "start at this time: a duration back from now (15m, 2h) or an RFC 3339 time")
				f.Int(&fl.limit, "limit", "N", 20, "at most this many events already in the stream (1 to 10000)")
				f.Bool(&fl.follow, "follow", "keep printing new events until interrupted")
				f.String(&fl.natsURL, "nats-url", "URL", DefaultNATSURL, "the NATS server").Env("ATMOST_NATS_URL")
				f.JSON("print each event's payload as JSON, one per line")
			},
			Run: func(ctx context.Context, c *line) int {
				return tailEvents(ctx, c, fl)
			},
		}},
	}
}

func tailEvents(ctx context.Context, c *line, fl tailFlags) int {
	io := c.io
	filter := strings.TrimSpace(fl.subject)
	if err := checkEventFilter(filter); err != nil {
		return c.usageError("--subject %q: %v; give a filter inside %s, e.g. \"atmost.event.parked.>\"", fl.subject, err, events.EventSubjects)
	}
	var start *time.Time
	if c.given("since") {
		t, err := parseSince(fl.since, time.Now())
		if err != nil {
			return c.usageError("--since %q: %v", fl.since, err)
		}
		start = &t
	}
	if fl.limit < 1 || fl.limit > 10000 {
		return c.usageError("--limit %d: give 1 to 10000", fl.limit)
	}

	nc, err := connectNATS(fl.natsURL)
	if err != nil {
		return c.fail(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return c.fail(err)
	}
	stream, err := js.Stream(ctx, events.EventsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return c.fail(fmt.Errorf("NATS at %s has no %s stream: no atmost role has run against it yet (is ATMOST_NATS_URL the right server?)", redact.URL(fl.natsURL), events.EventsStream))
	}
	if err != nil {
		return c.fail(fmt.Errorf("look up %s at %s: %w", events.EventsStream, redact.URL(fl.natsURL), err))
	}

	// Where to start, and how many events are there already from that point on.
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}
	var ready uint64
	if start != nil {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, start
		ready, err = matching(ctx, stream, jetstream.ConsumerConfig{FilterSubject: filter, DeliverPolicy: cfg.DeliverPolicy, OptStartTime: start})
	} else {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq, ready, err = startOfLast(ctx, stream, filter, uint64(fl.limit))
	}
	if err != nil {
		return c.fail(fmt.Errorf("read %s: %w", events.EventsStream, err))
	}
	want := min(ready, uint64(fl.limit)) // with --follow, only where the first wait begins
	if want == 0 && !fl.follow {
		return ExitOK
	}
	cons, err := stream.OrderedConsumer(ctx, cfg)
	if err != nil {
		return c.fail(fmt.Errorf("read %s: %w", events.EventsStream, err))
	}
	it, err := cons.Messages()
	if err != nil {
		return c.fail(fmt.Errorf("read %s: %w", events.EventsStream, err))
	}
	defer it.Stop()
	for printed := uint64(0); fl.follow || printed < want; {
		wait, cancel := ctx, context.CancelFunc(func() {})
		if !fl.follow {
			// Events counted above may age out of the stream before they are read.
			wait, cancel = context.WithTimeout(ctx, 10*time.Second)
		}
		msg, err := it.Next(jetstream.NextContext(wait))
		waited := wait.Err() != nil
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil && fl.follow:
			return ExitOK // interrupted: the normal end of --follow
		case waited && ctx.Err() == nil:
			return ExitOK
		default:
			return c.fail(fmt.Errorf("read %s: %w", events.EventsStream, err))
		}
		printed++
		e, err := events.Unmarshal(msg.Data())
		if err != nil {
			c.note("skipped a message on %s that is not an event: %v", msg.Subject(), err)
			continue
		}
		if c.asJSON {
			fmt.Fprintf(io.Stdout, "%s\n", compact(msg.Data()))
		} else {
			fmt.Fprintf(io.Stdout, "%s  %-36s  %s  %-26s  %-22s  %s\n", timestamp(e.At), msg.Subject(), e.DeliveryKey, transition(e.From, e.To), e.Reason, e.Actor)
		}
		if !fl.follow {
			if meta, err := msg.Metadata(); err == nil && meta.NumPending == 0 {
				return ExitOK
			}
		}
	}
	return ExitOK
}

// checkEventFilter accepts a subject filter inside atmost.event.>.
func checkEventFilter(f string) error {
	tokens := strings.Split(f, ".")
	if len(tokens) < 3 || tokens[0] != "atmost" || tokens[1] != "event" {
		return errors.New("not an event subject")
	}
	for i, t := range tokens {
		switch {
		case t == "" || strings.ContainsAny(t, " \t\r\n"):
			return errors.New("an empty token or white space")
		case t == ">" && i != len(tokens)-1:
			return errors.New("> must be the last token")
		case t != ">" && t != "*" && strings.ContainsAny(t, "*>"):
			return errors.New("a wildcard inside a token")
		}
	}
	return nil
}

// parseSince reads --since: a duration back from now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, errors.New("give a positive duration back from now")
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New("give a duration back from now (15m, 2h) or an RFC 3339 time (2026-01-02T15:04:05Z)")
	}
	return t, nil
}

// matching counts the events cfg would deliver: the num_pending of an ephemeral consumer,
// which the server computes without sending anything; the consumer is deleted at once.
func matching(ctx context.Context, s jetstream.Stream, cfg jetstream.ConsumerConfig) (uint64, error) {
	cfg.AckPolicy = jetstream.AckNonePolicy
	cfg.MemoryStorage = true
	cfg.InactiveThreshold = time.Minute // in case the delete below is lost
	cons, err := s.CreateConsumer(ctx, cfg)
	if err != nil {
		return 0, err
	}
	info := cons.CachedInfo()
	_ = s.DeleteConsumer(ctx, info.Name)
	return info.NumPending, nil
}

// startOfLast finds where the last n events matching filter begin: the highest stream sequence
// from which n of them remain, or the stream's first when fewer than n exist; and how many
// match from there. JetStream cannot read a filtered stream backwards, so it asks the server
// for counts: once for the first sequence, once for the last n messages (enough when the filter
// matches all of them), then a binary search, a few dozen counts at most.
func startOfLast(ctx context.Context, s jetstream.Stream, filter string, n uint64) (start, count uint64, err error) {
	info, err := s.Info(ctx)
	if err != nil {
		return 0, 0, err
	}
	first, last := info.State.FirstSeq, info.State.LastSeq
	if info.State.Msgs == 0 {
		return last + 1, 0, nil
	}
	from := func(seq uint64) (uint64, error) {
		return matching(ctx, s, jetstream.ConsumerConfig{FilterSubject: filter, DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq})
	}
	total, err := from(first)
	if err != nil || total <= n {
		return first, total, err
	}
	// from is non-increasing in seq; find the largest lo with from(lo) >= n (then it is n).
	lo, hi := first, last
	if last-first+1 > n {
		seq := last - n + 1
		c, err := from(seq)
		if err != nil || c >= n {
			return seq, c, err
		}
		hi = seq - 1
	}
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		c, err := from(mid)
		if err != nil {
			return 0, 0, err
		}
		if c >= n {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, n, nil
}

// connectNATS connects the CLI to NATS once, without waiting for a server that is not there.
func connectNATS(rawURL string) (*nats.Conn, error) {
	nc, err := nats.Connect(rawURL, nats.Name("atmost-cli"), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("cannot reach NATS at %s (is the server running, and ATMOST_NATS_URL or --nats-url right?): %w", redact.URL(rawURL), err)
	}
	return nc, nil
}
