package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/natsconn"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// Dispatcher works the intents of ATMOST_DISPATCH. Run it once per process; any number of
// processes may share the durable consumer.
type Dispatcher struct {
	cfg      Config
	ledger   Ledger
	relay    *relay.Relay
	consumer jetstream.Consumer
	adapters *adapters.Cache
	log      *zap.Logger
	counts   *counters
	slots    chan struct{} // one per intent being worked
	taking   sync.Mutex    // held by the pipeline taking a batch (take)
	rate     sync.Mutex
	reserved map[string]int // rate tokens set aside per account, between the gate and Authorize
	reports  chan *work     // sends done, waiting for Complete
	sending  sync.WaitGroup // sends in flight
	reads    chan *read     // claimed successes, waiting for their read-back
	// underway counts the sends started whose claimed success has not reached the read loop
	// yet (and will, unless the send ends without one); outstanding, the sends started whose
	// outcomes the completion loop has not taken yet. Each loop waits, at most the linger, for
	// what its count says is on its way: a batch's sends, returning moments apart, are then
	// read back in one request and recorded in one Complete, not the first on its own and the
	// rest after it.
	underway    atomic.Int64
	outstanding atomic.Int64
	// readsDue wakes the read loop's wait when underway reaches 0 in a send that had no
	// grouped read-back to hand it (offTheReads).
	readsDue chan struct{}
	tracer   trace.Tracer
	// held is why each account's work waits, as last logged (under rate, with reserved): the
	// gate reads it so that an account held for hours is logged once, not at every redelivery.
	held map[string]string
	// warmUntil is until when each account is warm (a success seen within ColdAfter), and
	// trials the cold accounts whose trial send is on its way (cold.go); under rate.
	warmUntil map[string]time.Time
	trials    map[string]bool
}

// Ledger is what the dispatcher does with the ledger: read its work and its replies' parents,
// fence superseded and unsendable intents and replies whose parent ended, read the gates, and take each batch through Begin, Authorize and Complete.
// *ledger.Ledger is one.
type Ledger interface {
	GetMany(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]ledger.Intent, error)
	Superseded(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]bool, error)
	ParkSuperseded(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]bool, error)
	ParkUnsendable(ctx context.Context, key identity.DeliveryKey, why string) error
	Replies
	Gates(ctx context.Context, accounts []string) (map[string]ledger.Gate, error)
	BeginMany(ctx context.Context, reqs []ledger.BeginRequest, lease time.Duration) ([]ledger.BeginResult, error)
	OwnClaims(ctx context.Context, reqs []ledger.BeginRequest) ([]ledger.Claim, error)
	AuthorizeMany(ctx context.Context, claims []ledger.Claim, inFlight time.Duration, contractVersion string) ([]ledger.AuthorizationResult, error)
	CompleteMany(ctx context.Context, reports []ledger.Report) ([]ledger.CompletionResult, error)
}

// Replies is what the dispatcher does with the parents of replies (envelope reply_to): read
// them, and park the replies whose parent ended without a publication.
type Replies interface {
	Parents(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]ledger.Parent, error)
	ParkDependencyUnmet(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]bool, error)
}

// New creates (or attaches to) the durable consumer on ATMOST_DISPATCH. The streams must exist.
func New(ctx context.Context, js jetstream.JetStream, l Ledger, rel *relay.Relay, cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	consumer, err := js.CreateOrUpdateConsumer(ctx, events.DispatchStream, jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: 4 * cfg.Concurrency,
		FilterSubject: events.DispatchSubjects,
	})
	if err != nil {
		return nil, fmt.Errorf("dispatch: consumer %s on %s: %w", cfg.Durable, events.DispatchStream, err)
	}
	return &Dispatcher{
		cfg: cfg, ledger: l, relay: rel, consumer: consumer,
		adapters:  adapters.NewCache(cfg.Platforms),
		log:       cfg.Logger.Named("dispatch"),
		counts:    newCounters(),
		slots:     make(chan struct{}, cfg.Concurrency),
		reserved:  map[string]int{},
		held:      map[string]string{},
		warmUntil: map[string]time.Time{},
		trials:    map[string]bool{},
		reports:   make(chan *work, cfg.Concurrency),
		reads:     make(chan *read, cfg.Concurrency),
		readsDue:  make(chan struct{}, 1),
		tracer:    tracing.Or(cfg.Tracer).Tracer("github.com/atmost/atmost/internal/role/dispatch"),
	}, nil
}

// Run works intents until ctx ends, then stops taking work, lets every send in flight finish
// and be completed, and returns. Work taken but not started is released for redelivery.
func (d *Dispatcher) Run(ctx context.Context) error {
	// Enough buffered for every pipeline to take a full batch.
	it, err := d.consumer.Messages(append([]jetstream.PullMessagesOpt{jetstream.PullMaxMessages(max(d.cfg.Batch*d.cfg.Pipelines, 2*d.cfg.Batch))}, d.cfg.pull...)...)
	if err != nil {
		return fmt.Errorf("dispatch: consume: %w", err)
	}
	msgs := make(chan jetstream.Msg, d.cfg.Batch)
	var iterErr error
	go func() {
		defer close(msgs)
		for {
			m, err := natsconn.Next(it, d.log)
			if err != nil {
				if !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					iterErr = err
				}
				return
			}
			msgs <- m
		}
	}()
	completed := make(chan struct{})
	go func() {
		defer close(completed)
		d.completeLoop()
	}()
	readsDone := make(chan struct{})
	go func() {
		defer close(readsDone)
		d.readLoop()
	}()

	// Several pipelines take batches at once, so one batch's ledger round trips overlap
	// another's. The batch in hand is finished even when ctx ends meanwhile.
	work := context.WithoutCancel(ctx)
	var pipelines sync.WaitGroup
	for range d.cfg.Pipelines {
		pipelines.Add(1)
		go func() {
			defer pipelines.Done()
			for {
				batch := d.take(ctx, msgs)
				if len(batch) == 0 {
					return
				}
				d.dispatch(ctx, work, batch)
			}
		}()
	}
	pipelines.Wait()
	it.Drain()
	for m := range msgs {
		_ = m.Nak() // taken from the server, never started: redeliver at once
	}
	d.sending.Wait()
	close(d.reads)
	<-readsDone
	close(d.reports)
	<-completed
	if ctx.Err() == nil {
		// The consumer went away (deleted, or the connection closed for good): not a clean stop.
		return fmt.Errorf("dispatch: work stopped arriving: %w", iterErr)
	}
	return nil
}

// dispatch takes a batch from work items to sends in flight: every ledger step is one
// statement for the whole batch. Once stop has ended, no send starts: work not yet authorized
// is given back (an open claim simply expires, abandoned, nothing sent).
func (d *Dispatcher) dispatch(stop, ctx context.Context, msgs []jetstream.Msg) {
	batch := d.parse(msgs)
	batch = d.pending(ctx, batch)
	batch = d.fresh(ctx, batch)
	batch = d.replies(ctx, batch)
	batch, unsendable := d.gate(ctx, batch)
	d.park(ctx, unsendable)
	if stop.Err() != nil {
		d.delayAll(batch, "shutdown", 0)
		return
	}
	batch, unsendable = d.stage(stop, batch)
	d.park(ctx, unsendable)
	if stop.Err() != nil {
		d.delayAll(batch, "shutdown", 0)
		return
	}
	batch = d.begin(ctx, batch)
	if len(batch) > 0 {
		d.crashPoint("after-begin")
	}
	batch = d.witnessClaims(ctx, batch)
	if stop.Err() != nil {
		d.delayAll(batch, "shutdown", d.cfg.ClaimLease)
		return
	}
	batch = d.authorize(ctx, batch)
	if len(batch) > 0 {
		d.crashPoint("after-authorize")
	}
	batch = d.witness(ctx, batch)
	if stop.Err() != nil {
		// Authorized, not sent: say so, which is the truth.
		d.notSent(batch, "shutdown", nil)
		return
	}
	d.underway.Add(int64(len(batch)))
	d.outstanding.Add(int64(len(batch)))
	for _, w := range batch {
		w.sent = true
		d.sending.Add(1)
		go d.send(w)
	}
}

// crashPoint is where a test may kill or stop the process, or break something around it, to
// prove what a failure at that step leaves behind. Outside tests both hooks are nil and this
// does nothing.
func (d *Dispatcher) crashPoint(step string) {
	if crash != nil {
		crash(step)
	}
	if d.cfg.hook != nil {
		d.cfg.hook(step)
	}
}

// crash is the process-wide hook of the crash tests' subprocesses.
var crash func(step string)
