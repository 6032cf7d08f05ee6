// Package tracecontext is how a trace crosses atmost's messages: W3C Trace Context in the
// NATS message headers. A producer that publishes an intent while its context holds a span
// calls Inject on the message's header; ingest continues that trace, stores the context of
// its store step with the intent (never part of the delivery key or the request), and every
// later message of the intent (its work items, its events) carries it on, so the dispatcher
// and the reconciler continue the same trace. Only the traceparent crosses the ledger;
// tracestate reaches ingest and stops there.
//
// The package holds the header names and the propagator in one place for atmost's roles and
// its producers. It takes a header as map[string][]string, which a nats.Header is, so it needs
// no NATS import. NATS headers are case-sensitive: Inject writes the lower-case names the W3C
// format specifies, and Extract also finds them spelled otherwise (Traceparent, as Go's
// net/http would write it).
package tracecontext

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

const (
	// Header is the W3C traceparent header: version, trace id, parent span id and flags, as
	// in 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01.
	Header = "traceparent"
	// StateHeader is the W3C tracestate header: vendors' opaque entries, carried beside
	// Header into ingest and not stored.
	StateHeader = "tracestate"
)

// Propagator is the one propagator atmost reads and writes: W3C Trace Context, without
// baggage.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Carrier adapts a NATS header to the propagator. Get finds a key in any spelling; Set writes
// it as given.
type Carrier map[string][]string

// Get returns the first value of key, whatever its letter case in the header.
func (c Carrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set replaces the values of key.
func (c Carrier) Set(key, value string) { c[key] = []string{value} }

// Keys lists the header's keys.
func (c Carrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// Inject writes the trace context of ctx's span into header, which must not be nil. Without
// a valid span context in ctx it writes nothing, and the message goes untraced.
func Inject(ctx context.Context, header map[string][]string) {
	Propagator.Inject(ctx, Carrier(header))
}

// Extract returns ctx continued from the trace context header carries, as a remote parent.
// A header without one, or with one that does not parse, returns ctx unchanged: the message is
// worked all the same, untraced.
func Extract(ctx context.Context, header map[string][]string) context.Context {
	if len(header) == 0 {
		return ctx
	}
	return Propagator.Extract(ctx, Carrier(header))
}

// TraceParent is the traceparent of ctx's span, as the ledger stores it: "" when ctx holds no
// valid span context.
func TraceParent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	var c traceparentOnly
	Propagator.Inject(ctx, &c)
	return c.value
}

// traceparentOnly is a carrier of the traceparent alone: what the ledger stores, without a
// map per intent.
type traceparentOnly struct{ value string }

func (c *traceparentOnly) Get(key string) string {
	if key == Header {
		return c.value
	}
	return ""
}

func (c *traceparentOnly) Set(key, value string) {
	if key == Header {
		c.value = value
	}
}

func (c *traceparentOnly) Keys() []string { return []string{Header} }

// WithTraceParent returns ctx continued from a stored traceparent, as a remote parent; "" or
// one that does not parse returns ctx unchanged.
func WithTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return Propagator.Extract(ctx, &traceparentOnly{value: traceparent})
}
