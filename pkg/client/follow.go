package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
)

// FollowConfig says which events Follow hands over and where it resumes.
type FollowConfig struct {
	// Durable names the consumer on ATMOST_EVENTS. JetStream keeps its position: a Follow
	// started again with the same name resumes after the last event it acknowledged, whatever
	// process runs it. Required; a name JetStream accepts ([A-Za-z0-9_-]).
	Durable string
	// Accounts, when not empty, keeps only the events of these accounts.
	Accounts []string
	// States, when not empty, keeps only the transitions into these states (of the six).
	States []atmosttype.State
	// DeliverNew makes a consumer created by this Follow start with the events published from
	// now on, instead of the oldest one the stream holds. An existing consumer keeps its
	// position either way: Follow keeps its start where it was created (JetStream cannot
	// change it, and moving it would skip or repeat events), whatever DeliverNew says now.
	DeliverNew bool
	// Batch is how many events one fetch asks for. Default DefaultFollowBatch.
	Batch int
	// AckWait is how long JetStream waits for the acknowledgement of an event before it
	// delivers it again; keep it above the longest handle. Default DefaultFollowAckWait.
	AckWait time.Duration
	// Remember is how many recent event ids Follow keeps to hand each event over once,
	// whatever JetStream redelivers meanwhile. Default DefaultRemember.
	Remember int
	// Bind reads the consumer Durable as it exists, never creating or changing it: a producer
	// in a NATS account of its own cannot create consumers in atmost's (one that could would
	// choose where the server delivers), so an operator creates its consumer
	// (docs/producers.md#nats-accounts). The consumer's own configuration then decides what
	// it delivers: Accounts, States and DeliverNew must be unset, and AckWait is its own.
	Bind bool
}

// The defaults of the configuration's fields (the zero value of a field means its default).
const (
	DefaultFollowBatch   = 100
	DefaultFollowAckWait = 30 * time.Second
	DefaultRemember      = 100_000
)

func (f FollowConfig) withDefaults() FollowConfig {
	f.Batch = cmp.Or(f.Batch, DefaultFollowBatch)
	f.AckWait = cmp.Or(f.AckWait, DefaultFollowAckWait)
	f.Remember = cmp.Or(f.Remember, DefaultRemember)
	return f
}

// Filters returns the subject filters of the configuration: one per (state, account) pair
// when both are given, one per account or per state when one is, every event when neither is.
// It refuses a state that is not one of the six and an account the envelope refuses.
func (f FollowConfig) Filters() ([]string, error) {
	for _, s := range f.States {
		if !s.Valid() { // a filter naming another state would match nothing, silently
			return nil, fmt.Errorf("client: follow: %q is not a state (%v)", s, atmosttype.States())
		}
	}
	for _, a := range f.Accounts {
		if err := identity.ValidateAccount(a); err != nil {
			return nil, fmt.Errorf("client: follow: %w", err)
		}
	}
	var out []string
	switch {
	case len(f.Accounts) > 0 && len(f.States) > 0:
		for _, a := range f.Accounts {
			for _, s := range f.States {
				out = append(out, events.EventSubject(string(s), a))
			}
		}
	case len(f.Accounts) > 0:
		for _, a := range f.Accounts {
			out = append(out, events.AccountSubjects(a))
		}
	case len(f.States) > 0:
		for _, s := range f.States {
			out = append(out, events.StateSubjects(string(s)))
		}
	default:
		out = []string{events.EventSubjects}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// Follow creates (or updates) the durable consumer cfg names on ATMOST_EVENTS and hands each
// event to handle, in the consumer's order, until ctx ends (Follow then returns nil) or
// something fails. An event is acknowledged after handle returned nil for it; an event whose
// id Follow has handed over already (a redelivery, or a relay's republication after the
// stream's duplicate window) is acknowledged without handle. When handle returns an error,
// Follow gives that event and the rest of its batch back to JetStream and returns the error:
// the next Follow with the same name starts with that event. A message that is not an event of
// this version stops Follow too, unacknowledged, rather than skip what a later version added.
//
// What Follow remembers does not survive the process. An event handled just before a crash,
// its acknowledgement lost, comes again after the restart: a handle with effects of its own
// dedupes on the event's ID (stable per transition), for example in its own store.
func (c *Client) Follow(ctx context.Context, cfg FollowConfig, handle func(context.Context, events.Event) error) error {
	cfg = cfg.withDefaults()
	if cfg.Durable == "" {
		return errors.New("client: follow: a durable name is required")
	}
	if cfg.Batch < 1 || cfg.Remember < 1 || cfg.AckWait < 0 {
		return fmt.Errorf("client: follow: configuration out of range: batch %d, remember %d, ack wait %s", cfg.Batch, cfg.Remember, cfg.AckWait)
	}
	cons, err := c.consumer(ctx, cfg)
	if err != nil {
		return err
	}
	seen := newRecent(cfg.Remember)
	for ctx.Err() == nil {
		batch, err := cons.Fetch(cfg.Batch, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("client: follow %s: %w", cfg.Durable, err)
		}
		// Each event is handed over as it arrives, not when the fetch ends: a fetch that is
		// not filled waits out its second, which held every event back as long.
		msgs := batch.Messages()
		for m := range msgs {
			if ctx.Err() != nil {
				giveBack(m, msgs)
				return nil
			}
			e, err := events.Unmarshal(m.Data())
			if err != nil {
				giveBack(m, msgs)
				return fmt.Errorf("client: follow %s: %s is not an event of version %d: %w", cfg.Durable, m.Subject(), events.Version, err)
			}
			if !seen.has(e.ID) {
				if err := handle(ctx, e); err != nil {
					giveBack(m, msgs)
					return err
				}
				seen.add(e.ID)
			}
			if err := m.Ack(); err != nil {
				giveBack(nil, msgs)
				return fmt.Errorf("client: follow %s: acknowledge %s: %w", cfg.Durable, e.ID, err)
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
			return fmt.Errorf("client: follow %s: %w", cfg.Durable, err)
		}
	}
	return nil
}

// consumer is Follow's consumer: the one cfg binds to, or the one it creates or updates.
func (c *Client) consumer(ctx context.Context, cfg FollowConfig) (jetstream.Consumer, error) {
	if cfg.Bind {
		if len(cfg.Accounts) > 0 || len(cfg.States) > 0 || cfg.DeliverNew {
			return nil, fmt.Errorf("client: follow: %s is bound: its own configuration decides what it delivers, not Accounts, States or DeliverNew", cfg.Durable)
		}
		cons, err := c.js.Consumer(ctx, events.EventsStream, cfg.Durable)
		if err != nil {
			return nil, fmt.Errorf("client: follow: consumer %s on %s: %w", cfg.Durable, events.EventsStream, err)
		}
		return cons, nil
	}
	filters, err := cfg.Filters()
	if err != nil {
		return nil, err
	}
	cc := jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: cfg.Batch,
	}
	if cfg.DeliverNew {
		cc.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	switch existing, err := c.js.Consumer(ctx, events.EventsStream, cfg.Durable); {
	case err == nil:
		// Where a consumer starts is fixed at its creation; asking for another start is
		// refused (JetStream error 10012). Its position is what resuming means.
		was := existing.CachedInfo().Config
		cc.DeliverPolicy, cc.OptStartSeq, cc.OptStartTime = was.DeliverPolicy, was.OptStartSeq, was.OptStartTime
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, fmt.Errorf("client: follow: consumer %s on %s: %w", cfg.Durable, events.EventsStream, err)
	}
	if len(filters) == 1 {
		cc.FilterSubject = filters[0]
	} else {
		cc.FilterSubjects = filters
	}
	cons, err := c.js.CreateOrUpdateConsumer(ctx, events.EventsStream, cc)
	if err != nil {
		return nil, fmt.Errorf("client: follow: consumer %s on %s: %w", cfg.Durable, events.EventsStream, err)
	}
	return cons, nil
}

// giveBack hands first (when not nil) and the rest of the fetch back to JetStream for
// delivery again at once, in their order. It waits for the fetch to end before it gives any
// back: one given back while the fetch is still open would come again inside it, behind the
// messages after it.
func giveBack(first jetstream.Msg, rest <-chan jetstream.Msg) {
	var msgs []jetstream.Msg
	if first != nil {
		msgs = append(msgs, first)
	}
	for m := range rest {
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		_ = m.Nak()
	}
}

// recent is a bounded set of event ids: the oldest is forgotten first.
type recent struct {
	ids  map[events.ID]struct{}
	ring []events.ID
	next int
}

func newRecent(n int) *recent {
	return &recent{ids: make(map[events.ID]struct{}, n), ring: make([]events.ID, n)}
}

func (r *recent) has(id events.ID) bool {
	_, ok := r.ids[id]
	return ok
}

func (r *recent) add(id events.ID) {
	delete(r.ids, r.ring[r.next])
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
	r.ids[id] = struct{}{}
}
