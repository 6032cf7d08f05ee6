package client

import (
	"cmp"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Config tunes a Client. The zero value of every field means its default.
type Config struct {
	// MaxInFlight bounds the publishes waiting for JetStream's acknowledgement at once;
	// PublishAsync blocks while it is reached. Default DefaultMaxInFlight.
	MaxInFlight int
	// AckTimeout is how long a publish waits for its acknowledgement before it is reported as
	// ErrMaybePublished. Default DefaultAckTimeout.
	AckTimeout time.Duration
	// StatusTimeout bounds one request to the outcome service when the caller's context has no
	// earlier deadline. Default DefaultStatusTimeout.
	StatusTimeout time.Duration
	// PollInterval is how often Await asks Status again while no event of its intent came:
	// events reach it on a plain subscription, which a disconnect or a slow consumer can miss.
	// Default DefaultPollInterval.
	PollInterval time.Duration
	// JetStreamAPI is the prefix under which the producer's NATS account imports the JetStream
	// API subjects of its consumer on ATMOST_EVENTS from atmost's account ("$JS.atmost.API" in
	// docs/producers.md#nats-accounts): the account's own $JS.API answers that it has no
	// JetStream. Empty is $JS.API, for a connection in atmost's account.
	JetStreamAPI string
}

// The defaults of the configuration's fields (the zero value of a field means its default).
const (
	DefaultMaxInFlight   = 4096
	DefaultAckTimeout    = 5 * time.Second
	DefaultStatusTimeout = 2 * time.Second
	DefaultPollInterval  = 2 * time.Second
)

func (c Config) withDefaults() Config {
	c.MaxInFlight = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	c.AckTimeout = cmp.Or(c.AckTimeout, DefaultAckTimeout)
	c.StatusTimeout = cmp.Or(c.StatusTimeout, DefaultStatusTimeout)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	return c
}

// Client publishes intents, asks for their outcome and follows events, on one NATS connection,
// which the caller owns (and closes). It is safe for concurrent use.
type Client struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config

	// slots holds one token per publish waiting for its acknowledgement.
	slots chan struct{}
	mu    sync.Mutex
	// waiting maps each message in flight to its future; JetStream's acknowledgement and error
	// callbacks name the message.
	waiting map[*nats.Msg]*Future
}

// New returns a Client on nc. It fails only for a configuration out of range.
func New(nc *nats.Conn, cfg Config) (*Client, error) {
	if nc == nil {
		return nil, errors.New("client: no NATS connection")
	}
	cfg = cfg.withDefaults()
	if cfg.MaxInFlight < 1 || cfg.AckTimeout < 0 || cfg.StatusTimeout < 0 || cfg.PollInterval < 0 {
		return nil, fmt.Errorf("client: configuration out of range: %+v", cfg)
	}
	c := &Client{nc: nc, cfg: cfg, slots: make(chan struct{}, cfg.MaxInFlight), waiting: map[*nats.Msg]*Future{}}
	opts := []jetstream.JetStreamOpt{
		jetstream.WithPublishAsyncTimeout(cfg.AckTimeout),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, ack *jetstream.PubAck) { c.acknowledged(m, ack) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) { c.failed(m, err) }),
	}
	var js jetstream.JetStream
	var err error
	if cfg.JetStreamAPI == "" {
		js, err = jetstream.New(nc, opts...)
	} else {
		js, err = jetstream.NewWithAPIPrefix(nc, cfg.JetStreamAPI, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	c.js = js
	return c, nil
}
