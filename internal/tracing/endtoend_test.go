package tracing_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// pipeline is a world with ingest, a dispatcher and a reconciler running on it, each with a
// ledger of its own and the tracer provider the test gives it, and a producer with a provider
// of its own, as a process apart.
type pipeline struct {
	*worldtest.World
	sim      *platformsim.Server
	producer trace.Tracer
}

func newPipeline(t *testing.T, plan platformsim.Plan, ingestTP, dispatchTP, reconcileTP trace.TracerProvider) *pipeline {
	t.Helper()
	w := worldtest.New(t)
	s, url := w.Simulator(platformsim.Config{Plan: plan})
	settings, err := json.Marshal(map[string]any{"url": url, "reconcile_delay": "200ms"})
	require.NoError(t, err)
	require.NoError(t, w.Ledger.AddAccount(w.Ctx, ledger.Account{ID: "acct-1", Platform: sim.Name, Settings: settings}, ledger.Actor{Name: "test", Reason: "a test account"}))
	w.Exec(`UPDATE policies SET rate_per_minute = 0 WHERE scope = ''`)
	actor := func(name string) (*ledger.Ledger, *relay.Relay) {
		l, err := ledger.New(w.DB.AppPool(t), ledger.Config{Actor: name})
		require.NoError(t, err)
		return l, relay.New(l, w.JS, relay.Config{})
	}

	il, irel := actor("ingest")
	in, err := ingest.New(w.Ctx, w.JS, il, ingest.Config{MaxWait: 50 * time.Millisecond, Tracer: ingestTP})
	require.NoError(t, err)
	w.Run(func(ctx context.Context) error {
		for ctx.Err() == nil {
			if _, keys, err := in.BatchWritten(ctx); err == nil && !keys.Empty() {
				_ = irel.AfterWrite(ctx, keys)
			}
		}
		return nil
	})
	dl, drel := actor("dispatcher")
	d, err := dispatch.New(w.Ctx, w.JS, dl, drel, dispatch.Config{
		Platforms: platform.Registry{sim.Name: sim.Open}, ClaimLease: ledger.MinLease, InFlightLease: ledger.MinLease,
		SendTimeout: time.Second, ReadBackTimeout: time.Second, Margin: time.Second, AckWait: 2 * time.Second, Tracer: dispatchTP})
	require.NoError(t, err)
	w.Run(d.Run)
	rl, rrel := actor("reconciler")
	r, err := reconcile.New(w.Ctx, w.JS, rl, rrel, reconcile.Config{
		Platforms: platform.Registry{sim.Name: sim.Open}, LookupTimeout: 2 * time.Second, ReadBackTimeout: time.Second,
		ScanInterval: time.Hour, RetryDelay: 200 * time.Millisecond, AckWait: 2 * time.Second, Tracer: reconcileTP})
	require.NoError(t, err)
	w.Run(r.Run)
	return &pipeline{World: w, sim: s, producer: sdktrace.NewTracerProvider().Tracer("producer")}
}

// publish publishes one post as a producer does inside a span of its own, with the trace
// context in the message's headers, and returns the intent's key and the producer's span.
func (p *pipeline) publish(text string) (identity.DeliveryKey, trace.SpanContext) {
	p.T.Helper()
	body := fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":%q}}`, text)
	env, err := identity.ParseEnvelope([]byte(body))
	require.NoError(p.T, err)
	ctx, span := p.producer.Start(p.Ctx, "publish", trace.WithSpanKind(trace.SpanKindProducer))
	defer span.End()
	msg := nats.NewMsg(events.IntentSubject("acct-1"))
	msg.Data = []byte(body)
	tracecontext.Inject(ctx, msg.Header)
	_, err = p.JS.PublishMsg(ctx, msg)
	require.NoError(p.T, err)
	return env.DeliveryKey(), span.SpanContext()
}

// settled waits for the intent to be published.
func (p *pipeline) settled(key identity.DeliveryKey) ledger.Intent {
	p.T.Helper()
	require.Eventually(p.T, func() bool {
		in, err := p.Ledger.Get(p.Ctx, key)
		return err == nil && in.State == ledger.Published
	}, 30*time.Second, 20*time.Millisecond, "the intent is published")
	return p.Intent(key)
}

// spansOf waits until the recorder holds exactly the named spans in trace id (one each,
// unless a name is given twice) and returns them by name.
func spansOf(t *testing.T, rec *tracetest.SpanRecorder, id trace.TraceID, names ...string) map[string]sdktrace.ReadOnlySpan {
	t.Helper()
	want := map[string]int{}
	for _, n := range names {
		want[n]++
	}
	var got map[string]int
	var byName map[string]sdktrace.ReadOnlySpan
	ok := func() bool {
		got, byName = map[string]int{}, map[string]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID() == id {
				got[s.Name()]++
				byName[s.Name()] = s
			}
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	}
	require.Eventually(t, ok, 10*time.Second, 20*time.Millisecond, "the spans of trace %s", id)
	ok()
	require.Equal(t, want, got)
	return byName
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// requireChild requires child's parent to be parent, within one trace.
func requireChild(t *testing.T, parent, child sdktrace.ReadOnlySpan) {
	t.Helper()
	require.Equal(t, parent.SpanContext().TraceID(), child.SpanContext().TraceID(), "%s and %s", parent.Name(), child.Name())
	require.Equal(t, parent.SpanContext().SpanID(), child.Parent().SpanID(), "%s is a child of %s", child.Name(), parent.Name())
}

// requireInOrder requires each span to have ended before the next one started.
func requireInOrder(t *testing.T, spans ...sdktrace.ReadOnlySpan) {
	t.Helper()
	for i := 1; i < len(spans); i++ {
		require.False(t, spans[i].StartTime().Before(spans[i-1].EndTime()), "%s ends before %s starts", spans[i-1].Name(), spans[i].Name())
	}
}

// One intent is one trace, from the producer's span to the platform: ingest's store span is a
// child of the producer's (across the message's headers), the intent is stored with the store
// span's context, the dispatcher's span continues it from the work item's headers with a
// child per step in their order, and the reconciler, for an intent whose send is unknown,
// continues the same trace from the ledger. A duplicate publish is a store span in its own
// producer's trace and leaves the stored context alone.
func TestOneIntentIsOneTraceFromTheProducerToThePlatform(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := newPipeline(t, platformsim.Plan{Script: []platformsim.Fault{platformsim.FaultOK, platformsim.FaultDropAfterCommit}}, tp, tp, tp)

	// Sent, read back, published by the dispatcher.
	key, producer := p.publish("followed end to end")
	in := p.settled(key)
	s := spansOf(t, rec, producer.TraceID(), tracing.SpanStore, tracing.SpanDispatch, tracing.SpanBegin, tracing.SpanAuthorize,
		tracing.SpanWitness, tracing.SpanSend, tracing.SpanReadBack, tracing.SpanComplete)
	store := s[tracing.SpanStore]
	require.Equal(t, producer.SpanID(), store.Parent().SpanID(), "ingest continues the producer's span")
	require.True(t, store.Parent().IsRemote())
	require.Equal(t, trace.SpanKindConsumer, store.SpanKind())
	require.Equal(t, fmt.Sprintf("00-%s-%s-01", producer.TraceID(), store.SpanContext().SpanID()), in.TraceParent,
		"the intent is stored with the store span's context")
	dispatched := s[tracing.SpanDispatch]
	requireChild(t, store, dispatched)
	require.True(t, dispatched.Parent().IsRemote(), "the dispatcher continues it from the work item's headers")
	for _, step := range []string{tracing.SpanBegin, tracing.SpanAuthorize, tracing.SpanWitness, tracing.SpanSend, tracing.SpanReadBack, tracing.SpanComplete} {
		requireChild(t, dispatched, s[step])
	}
	requireInOrder(t, store, s[tracing.SpanBegin], s[tracing.SpanAuthorize], s[tracing.SpanWitness], s[tracing.SpanSend], s[tracing.SpanReadBack], s[tracing.SpanComplete])
	require.Equal(t, key.String(), attr(store, string(tracing.DeliveryKey)))
	require.Equal(t, "created", attr(store, string(tracing.Outcome)))
	require.Equal(t, key.String(), attr(dispatched, string(tracing.DeliveryKey)))
	require.Equal(t, "completed", attr(dispatched, string(tracing.Outcome)))
	require.Equal(t, in.Token.String(), attr(dispatched, string(tracing.Attempt)))
	require.Equal(t, string(platform.Sent), attr(s[tracing.SpanSend], string(tracing.Outcome)))
	require.Equal(t, in.ObjectID, attr(s[tracing.SpanSend], string(tracing.ObjectID)))
	require.Equal(t, trace.SpanKindClient, s[tracing.SpanSend].SpanKind())
	require.Equal(t, "confirmed", attr(s[tracing.SpanReadBack], string(tracing.Outcome)))
	require.Equal(t, "published", attr(s[tracing.SpanComplete], string(tracing.Outcome)))

	// Its events carry the stored context too (its work item did: the dispatcher's span has no
	// other source for its parent, and the work queue no longer holds it).
	requireEventHeaders(t, p, key, in.TraceParent)

	// The same envelope again, in another producer's trace: a duplicate, its own store span,
	// nothing else; the intent keeps the first context.
	again, other := p.publish("followed end to end")
	require.Equal(t, key, again, "the trace context is no part of the delivery key")
	dup := spansOf(t, rec, other.TraceID(), tracing.SpanStore)[tracing.SpanStore]
	require.Equal(t, other.SpanID(), dup.Parent().SpanID())
	require.Equal(t, "duplicate", attr(dup, string(tracing.Outcome)))
	require.Equal(t, in.TraceParent, p.Intent(key).TraceParent)

	// Unknown outcome: the reconciler's turn continues the intent's trace from the ledger,
	// beside the dispatcher's, with its one lookup and the found object's read-back.
	key, producer = p.publish("unknown, then looked up")
	in = p.settled(key)
	require.Equal(t, ledger.ReasonReconciledFound, in.Reason)
	s = spansOf(t, rec, producer.TraceID(), tracing.SpanStore, tracing.SpanDispatch, tracing.SpanBegin, tracing.SpanAuthorize,
		tracing.SpanWitness, tracing.SpanSend, tracing.SpanComplete, tracing.SpanReconcile, tracing.SpanLookup, tracing.SpanReadBack)
	store = s[tracing.SpanStore]
	require.Equal(t, producer.SpanID(), store.Parent().SpanID())
	requireChild(t, store, s[tracing.SpanDispatch])
	require.Equal(t, string(platform.Unknown), attr(s[tracing.SpanSend], string(tracing.Outcome)))
	require.Equal(t, "indeterminate", attr(s[tracing.SpanComplete], string(tracing.Outcome)))
	reconciled := s[tracing.SpanReconcile]
	requireChild(t, store, reconciled)
	require.True(t, reconciled.Parent().IsRemote(), "the reconciler continues it from the stored traceparent")
	require.Equal(t, "resolved_found", attr(reconciled, string(tracing.Outcome)))
	requireChild(t, reconciled, s[tracing.SpanLookup])
	requireChild(t, reconciled, s[tracing.SpanReadBack])
	require.Equal(t, "found", attr(s[tracing.SpanLookup], string(tracing.Outcome)))
	requireInOrder(t, s[tracing.SpanComplete], reconciled)
	requireInOrder(t, s[tracing.SpanLookup], s[tracing.SpanReadBack])
	require.Equal(t, 1, p.sim.Lookups(key.String()))
}

// requireEventHeaders requires every event of key, one per history row, to carry
// traceparent ("" for none).
func requireEventHeaders(t *testing.T, p *pipeline, key identity.DeliveryKey, traceparent string) {
	t.Helper()
	s, err := p.JS.Stream(p.Ctx, events.EventsStream)
	require.NoError(t, err)
	want := p.Count(`SELECT count(*) FROM history WHERE delivery_key = $1`, key.Bytes())
	require.GreaterOrEqual(t, want, 4, "pending, authorized, and the outcome at least")
	headers := map[uint64]string{}
	require.Eventually(t, func() bool {
		info, err := s.Info(p.Ctx)
		require.NoError(t, err)
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
			m, err := s.GetMsg(p.Ctx, seq)
			if err != nil {
				continue
			}
			if e, err := events.Unmarshal(m.Data); err == nil && e.DeliveryKey == key {
				headers[seq] = m.Header.Get(tracecontext.Header)
			}
		}
		return len(headers) == want
	}, 10*time.Second, 20*time.Millisecond, "one event per history row of the intent")
	for seq, h := range headers {
		require.Equal(t, traceparent, h, "event %d", seq)
	}
}

// With no exporter in ingest (the no-op provider), the producer's own context is what the
// intent is stored with, and a dispatcher that exports continues the producer's span directly.
func TestWithoutAnExporterTheProducersContextStillFlows(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := newPipeline(t, platformsim.Plan{}, nil, tp, nil)
	key, producer := p.publish("no exporter upstream")
	in := p.settled(key)
	require.Equal(t, fmt.Sprintf("00-%s-%s-01", producer.TraceID(), producer.SpanID()), in.TraceParent, "the producer's traceparent, stored as it came")
	s := spansOf(t, rec, producer.TraceID(), tracing.SpanDispatch, tracing.SpanBegin, tracing.SpanAuthorize,
		tracing.SpanWitness, tracing.SpanSend, tracing.SpanReadBack, tracing.SpanComplete)
	require.Equal(t, producer.SpanID(), s[tracing.SpanDispatch].Parent().SpanID())
}

// An intent published without a trace context is stored with none when ingest exports
// nothing, and its events carry none.
func TestAnUntracedIntentStaysUntraced(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, platformsim.Plan{}, nil, nil, nil)
	body := `{"v":1,"account":"acct-1","action":"post","request":{"text":"untraced"}}`
	env, err := identity.ParseEnvelope([]byte(body))
	require.NoError(t, err)
	_, err = p.JS.PublishMsg(p.Ctx, &nats.Msg{Subject: events.IntentSubject("acct-1"), Data: []byte(body), Header: nats.Header{jetstream.MsgIDHeader: []string{"untraced-1"}}})
	require.NoError(t, err)
	in := p.settled(env.DeliveryKey())
	require.Empty(t, in.TraceParent)
	require.Equal(t, 1, p.Count(`SELECT count(*) FROM intents WHERE traceparent IS NULL`))
	requireEventHeaders(t, p, env.DeliveryKey(), "")
}
