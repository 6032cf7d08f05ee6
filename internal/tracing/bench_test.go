package tracing_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// BenchmarkNoopTracingPerIntent is what the roles' tracing costs one intent with no exporter
// configured (the no-op provider), with and without a producer's traceparent: ingest's store
// span and the traceparent it stores, and the dispatcher's dispatch span and its seven step
// checks, as the roles make them.
func BenchmarkNoopTracingPerIntent(b *testing.B) {
	tracer := noop.NewTracerProvider().Tracer("bench")
	for _, c := range []struct {
		name   string
		header map[string][]string
	}{
		{"untraced", map[string][]string{"Nats-Msg-Id": {"m-1"}}},
		{"traced", map[string][]string{"Nats-Msg-Id": {"m-1"}, tracecontext.Header: {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				// ingest
				sctx, store := tracer.Start(tracecontext.Extract(ctx, c.header), tracing.SpanStore, trace.WithSpanKind(trace.SpanKindConsumer))
				stored := tracecontext.TraceParent(sctx)
				_ = store.IsRecording()
				_ = store.IsRecording()
				store.End()
				// the dispatcher, from the work item's header
				work := map[string][]string{"Nats-Msg-Id": {"work:1"}}
				if stored != "" {
					work[tracecontext.Header] = []string{stored}
				}
				_, dispatch := tracer.Start(tracecontext.Extract(ctx, work), tracing.SpanDispatch, trace.WithSpanKind(trace.SpanKindConsumer))
				for range 9 {
					_ = dispatch.IsRecording()
				}
				dispatch.End()
			}
		})
	}
}
