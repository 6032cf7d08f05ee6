package tracecontext_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/atmost/atmost/pkg/tracecontext"
)

const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// What Inject writes, Extract reads back: the same span context, as a remote parent, under the
// lower-case W3C names.
func TestInjectAndExtractRoundTrip(t *testing.T) {
	ctx := tracecontext.WithTraceParent(context.Background(), parent)
	require.Equal(t, parent, tracecontext.TraceParent(ctx))
	h := map[string][]string{}
	tracecontext.Inject(ctx, h)
	require.Equal(t, []string{parent}, h["traceparent"])
	got := trace.SpanContextFromContext(tracecontext.Extract(context.Background(), h))
	require.True(t, got.IsRemote())
	require.Equal(t, trace.SpanContextFromContext(ctx).TraceID(), got.TraceID())
	require.Equal(t, "00f067aa0ba902b7", got.SpanID().String())
	require.True(t, got.IsSampled())
}

// A header spelled otherwise is found; no header, an empty one and one that does not parse
// leave the context untraced; a context without a span injects nothing and stores "".
func TestWhatIsNotATraceContextIsNoTraceContext(t *testing.T) {
	bg := context.Background()
	got := trace.SpanContextFromContext(tracecontext.Extract(bg, map[string][]string{"Traceparent": {parent}}))
	require.Equal(t, "4bf92f3577b34da6a3ce929d0e0e4736", got.TraceID().String(), "net/http's spelling")
	for _, h := range []map[string][]string{nil, {}, {"traceparent": {}}, {"traceparent": {""}},
		{"traceparent": {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}, {"traceparent": {"not a traceparent"}}} {
		require.False(t, trace.SpanContextFromContext(tracecontext.Extract(bg, h)).IsValid(), "%v", h)
	}
	require.Equal(t, bg, tracecontext.WithTraceParent(bg, ""))
	require.False(t, trace.SpanContextFromContext(tracecontext.WithTraceParent(bg, "garbage")).IsValid())
	h := map[string][]string{}
	tracecontext.Inject(bg, h)
	require.Empty(t, h)
	require.Empty(t, tracecontext.TraceParent(bg))
}
