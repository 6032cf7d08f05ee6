package dispatch

import (
	"cmp"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// Config tunes a Dispatcher. The zero value of every field means its default.
type Config struct {
	// Durable is the name of the pull consumer on ATMOST_DISPATCH. Default DefaultDurable.
	Durable string
	// Batch is how many work items are taken at once: their ledger round trips (read, gates,
	// Begin, Authorize, the witness, Complete) are one statement each for the whole batch.
	// Default DefaultBatch.
	Batch int
	// Concurrency bounds the intents being worked at once (sends in flight included). A batch
	// is cut short when no slot is free, so it must leave room for full batches besides the
	// sends in flight. Default DefaultConcurrency.
	Concurrency int
	// ClaimLease is the pre-authorization lease Begin takes: a worker that has not authorized
	// within it is refused from then on. Default DefaultClaimLease.
	ClaimLease time.Duration
	// InFlightLease is the lease Authorize writes: a send not completed within it becomes
	// indeterminate by expiry. It must exceed SendTimeout + ReadBackTimeout + Margin.
	// Default DefaultInFlightLease.
	InFlightLease time.Duration
	// SendTimeout bounds one send. Default DefaultSendTimeout.
	SendTimeout time.Duration
	// ReadBackTimeout bounds the read-back after a claimed success. Default DefaultReadBackTimeout.
	ReadBackTimeout time.Duration
	// Margin is how long before the in-flight deadline the send's context ends, measured on
	// this process's monotonic clock from before Authorize was called, so that no byte is
	// written after the deadline whatever the clocks say. Default DefaultMargin.
	Margin time.Duration
	// GateDelay is how long work waits before Begin (no attempt is created) when a kill
	// switch, a disabled account or a revoked credential refuses it, or its adapter does not
	// open. A rate limit delays work by the time until the next token instead. Default DefaultGateDelay.
	GateDelay time.Duration
	// ColdAfter is how long after this dispatcher last saw one of an account's sends succeed
	// the account is cold again: one of its intents at a time is sent until one succeeds, so
	// that a platform gone away meanwhile sees one send, not a burst (cold.go). Default
	// DefaultColdAfter.
	ColdAfter time.Duration
	// Pipelines is how many batches are taken through the ledger steps at once. More overlap
	// more round trips, but under SERIALIZABLE they also conflict: measured on 2 cores, 4
	// pipelines collapsed to 300 intents/s while 2 gave 1,432 (1,737 at READ COMMITTED).
	// Default DefaultPipelines.
	Pipelines int
	// Linger is how long the first work item of a batch waits at most for others to join it
	// (the wait ends sooner, once a burst's items stopped arriving), and the first claimed
	// success of a read-back group and the first outcome of a Complete for the sends still on
	// their way to them. Default DefaultLinger.
	Linger time.Duration
	// LedgerTimeout bounds each ledger call, so a half-open connection cannot stall the
	// dispatcher. Default DefaultLedgerTimeout.
	LedgerTimeout time.Duration
	// AckWait is the consumer's redelivery timeout; work in progress is kept alive with
	// InProgress well within it. Default DefaultAckWait.
	AckWait time.Duration
	// Platforms opens the adapter of each account. Required.
	Platforms platform.Registry
	// Logger; nil means no logging.
	Logger *zap.Logger
	// Tracer makes each work item's dispatch span, continuing the trace its headers carry,
	// and the spans of its steps; nil means the no-op provider.
	Tracer trace.TracerProvider

	// gap ends the take of a batch when no work item arrived for this long after the latest:
	// burstGap, or the linger when that is shorter (tests set it).
	gap time.Duration
	// hook is called at each crash point of this dispatcher (tests only).
	hook func(step string)
	// noTrials: every account is warm (tests only: those about how a burst is batched, read
	// back and recorded, which a cold account's trial would split).
	noTrials bool
	// pull holds the consumer's pull options (tests only: a short expiry, so that missed
	// heartbeats show within a test).
	pull []jetstream.PullMessagesOpt
}

// burstGap is longer than the work items of one burst (ingest publishes a batch's together)
// take to arrive one after the other, and shorter than the time between two bursts of a steady
// load.
const burstGap = 250 * time.Microsecond

// The defaults of Config's fields (the zero value of a field means its default), which the
// role's flags show too.
const (
	DefaultDurable         = "dispatcher"
	DefaultBatch           = 128
	DefaultConcurrency     = 1024
	DefaultClaimLease      = 30 * time.Second
	DefaultInFlightLease   = 60 * time.Second
	DefaultSendTimeout     = 10 * time.Second
	DefaultReadBackTimeout = 5 * time.Second
	DefaultMargin          = 2 * time.Second
	DefaultGateDelay       = 5 * time.Second
	DefaultColdAfter       = time.Minute
	DefaultPipelines       = 2
	DefaultLinger          = 2 * time.Millisecond
	DefaultLedgerTimeout   = 30 * time.Second
	DefaultAckWait         = 30 * time.Second
)

func (c Config) withDefaults() Config {
	c.Durable = cmp.Or(c.Durable, DefaultDurable)
	c.Batch = cmp.Or(c.Batch, DefaultBatch)
	c.Concurrency = cmp.Or(c.Concurrency, DefaultConcurrency)
	c.ClaimLease = cmp.Or(c.ClaimLease, DefaultClaimLease)
	c.InFlightLease = cmp.Or(c.InFlightLease, DefaultInFlightLease)
	c.SendTimeout = cmp.Or(c.SendTimeout, DefaultSendTimeout)
	c.ReadBackTimeout = cmp.Or(c.ReadBackTimeout, DefaultReadBackTimeout)
	c.Margin = cmp.Or(c.Margin, DefaultMargin)
	c.GateDelay = cmp.Or(c.GateDelay, DefaultGateDelay)
	c.ColdAfter = cmp.Or(c.ColdAfter, DefaultColdAfter)
	c.Pipelines = cmp.Or(c.Pipelines, DefaultPipelines)
	c.Linger = cmp.Or(c.Linger, DefaultLinger)
	if c.gap == 0 {
		c.gap = min(burstGap, c.Linger)
	}
	c.LedgerTimeout = cmp.Or(c.LedgerTimeout, DefaultLedgerTimeout)
	c.AckWait = cmp.Or(c.AckWait, DefaultAckWait)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Platforms == nil:
		return fmt.Errorf("dispatch: no platform adapters configured")
	case c.Batch < 1 || c.Batch > 1000:
		return fmt.Errorf("dispatch: batch %d: must be between 1 and 1000", c.Batch)
	case c.Pipelines < 1 || c.Pipelines > 64:
		return fmt.Errorf("dispatch: pipelines %d: must be between 1 and 64", c.Pipelines)
	case c.Concurrency < c.Batch:
		return fmt.Errorf("dispatch: concurrency %d: must be at least the batch (%d)", c.Concurrency, c.Batch)
	case c.ClaimLease < ledger.MinLease || c.InFlightLease < ledger.MinLease:
		return fmt.Errorf("dispatch: leases (claim %s, in flight %s) must be at least %s", c.ClaimLease, c.InFlightLease, ledger.MinLease)
	case c.SendTimeout <= 0 || c.ReadBackTimeout <= 0:
		return fmt.Errorf("dispatch: send timeout and read-back timeout must be positive")
	case c.Margin < time.Second:
		// Above CockroachDB's maximum clock offset (500 ms by default), with room to spare.
		return fmt.Errorf("dispatch: lease margin %s: must be at least 1s", c.Margin)
	case c.SendTimeout+c.ReadBackTimeout+c.Linger+c.Margin >= c.InFlightLease:
		// The linger: a Complete waits at most that long for the outcomes on their way to it.
		return fmt.Errorf("dispatch: in-flight lease %s must exceed send timeout %s + read-back timeout %s + linger %s + margin %s, or completions would arrive after the lease expired",
			c.InFlightLease, c.SendTimeout, c.ReadBackTimeout, c.Linger, c.Margin)
	case c.ColdAfter < 0:
		return fmt.Errorf("dispatch: cold after %s: must be positive", c.ColdAfter)
	case c.AckWait < time.Second:
		return fmt.Errorf("dispatch: ack wait %s: must be at least 1s", c.AckWait)
	}
	return nil
}
