package tracecontext_test

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/atmost/atmost/pkg/tracecontext"
)

// A producer publishes an intent inside a span of its own: the message's headers then carry
// the span's context, and atmost's roles continue the trace.
func ExampleInject() {
	tracer := sdktrace.NewTracerProvider().Tracer("producer")
	ctx, span := tracer.Start(context.Background(), "publish")
	defer span.End()

	msg := nats.NewMsg("atmost.intent.acct-1")
	msg.Data = []byte(`{"v":1,"account":"acct-1","action":"post","request":{"text":"hello"}}`)
	tracecontext.Inject(ctx, msg.Header)
	// js.PublishMsg(ctx, msg)

	sc := span.SpanContext()
	fmt.Println(msg.Header.Get(tracecontext.Header) == fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID()))
	// Output: true
}
