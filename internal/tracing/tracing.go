// Package tracing sets up the OpenTelemetry tracer provider of an atmost role from the
// standard OTEL_ environment variables, and names the spans' attributes in one place.
//
// No exporter is the default: without OTEL_TRACES_EXPORTER=otlp or an OTLP endpoint a role
// runs with the no-op provider, whose spans cost a context lookup each and record nothing,
// while the trace context still flows through the messages and the ledger (a no-op span
// carries its parent's context), so a role that exports continues the producer's trace even
// when the roles before it export nothing. With an exporter, spans go over OTLP/HTTP (protobuf,
// or JSON by OTEL_EXPORTER_OTLP_PROTOCOL) through a batch processor; the exporter and the SDK
// read their other OTEL_ variables (headers, TLS, timeout, compression, sampler, batch
// processor, resource attributes) from the process environment as OpenTelemetry defines them.
// gRPC is not built in.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/version"
)

// The exporters a role knows.
const (
	None = "none"
	OTLP = "otlp"
)

// Variable is one environment variable the roles read for tracing, as --help prints it.
type Variable struct{ Name, Usage string }

// Variables are what every role's --help prints under its traces heading, in this order; the
// configuration page lists exactly these (internal/checks/docs).
var Variables = []Variable{
	{"OTEL_TRACES_EXPORTER", "otlp exports spans over OTLP/HTTP, none exports nothing (default: otlp when an endpoint below is set, else none)"},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "the collector's OTLP/HTTP base URL, e.g. http://127.0.0.1:4318; spans go to its /v1/traces"},
	{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "the whole URL spans go to, instead of the base URL's /v1/traces"},
	{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf (default) or http/json; grpc is not built in"},
	{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "the same for spans alone; wins over OTEL_EXPORTER_OTLP_PROTOCOL"},
	{"OTEL_SERVICE_NAME", "the spans' service.name (default atmost- and the role's name)"},
	{"OTEL_SDK_DISABLED", "true exports nothing, whatever else is set"},
}

// Usage prints the traces heading of a role's --help.
func Usage(w io.Writer) {
	fmt.Fprintf(w, "\nTraces (OpenTelemetry; environment only, no exporter unless set; the SDK's other OTEL_ variables apply):\n")
	width := 0
	for _, v := range Variables {
		width = max(width, len(v.Name))
	}
	for _, v := range Variables {
		fmt.Fprintf(w, "  %-*s  %s\n", width, v.Name, v.Usage)
	}
}

// Settings are a role's tracing settings, read from its environment.
type Settings struct {
	// Exporter is None or OTLP.
	Exporter string
	// Endpoint is the URL spans go to; "" leaves it to the exporter (https://localhost:4318).
	Endpoint string
	// Protocol is http/protobuf or http/json ("" for the default, http/protobuf).
	Protocol string
	// Service is the spans' service.name; "" for atmost-<role>.
	Service string
	// err is what the environment got wrong, for Validate.
	err error
}

// FromEnv reads the settings from env (a role's environment).
func FromEnv(env func(string) (string, bool)) Settings {
	get := func(name string) string {
		v, _ := env(name)
		return strings.TrimSpace(v)
	}
	s := Settings{Exporter: None, Service: get("OTEL_SERVICE_NAME")}
	s.Protocol = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if s.Protocol == "" {
		s.Protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	s.Endpoint = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if base := get("OTEL_EXPORTER_OTLP_ENDPOINT"); s.Endpoint == "" && base != "" {
		s.Endpoint = strings.TrimSuffix(base, "/") + "/v1/traces"
	}
	exporter := strings.ToLower(get("OTEL_TRACES_EXPORTER"))
	switch {
	case strings.EqualFold(get("OTEL_SDK_DISABLED"), "true"):
	case exporter == OTLP:
		s.Exporter = OTLP
	case exporter == None:
	case exporter != "":
		s.err = fmt.Errorf("OTEL_TRACES_EXPORTER=%q: must be otlp or none", exporter)
	case s.Endpoint != "":
		s.Exporter = OTLP
	}
	return s
}

// Validate reports settings a role must refuse to start with.
func (s Settings) Validate() error {
	if s.err != nil {
		return s.err
	}
	if s.Exporter != OTLP {
		return nil
	}
	switch s.Protocol {
	case "", "http/protobuf", "http/json":
	default:
		return fmt.Errorf("OTLP protocol %q: only http/protobuf and http/json are built in", s.Protocol)
	}
	return nil
}

// Provider is a role's tracer provider and how to flush it.
type Provider struct {
	trace.TracerProvider
	sdk *sdktrace.TracerProvider
}

// Exporting reports whether spans leave the process.
func (p Provider) Exporting() bool { return p.sdk != nil }

// Shutdown exports the spans still buffered, within ctx, and stops the provider; a no-op
// provider has nothing to do.
func (p Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// NewProvider returns role's tracer provider: the no-op one unless s exports. Export failures
// are logged as warnings, never a reason to stop: a trace is worth less than the work.
func NewProvider(ctx context.Context, role string, s Settings, log *zap.Logger) (Provider, error) {
	if err := s.Validate(); err != nil {
		return Provider{}, err
	}
	if s.Exporter != OTLP {
		return Provider{TracerProvider: noop.NewTracerProvider()}, nil
	}
	var opts []otlptracehttp.Option
	if s.Endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(s.Endpoint))
	}
	if s.Protocol == "http/json" {
		opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return Provider{}, fmt.Errorf("traces: OTLP exporter: %w", err)
	}
	service := s.Service
	if service == "" {
		service = "atmost-" + role
	}
	// Later options win: the default name, then the environment's resource attributes, then
	// the role's OTEL_SERVICE_NAME.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "atmost-"+role), attribute.String("service.version", version.String())),
		resource.WithFromEnv(),
		resource.WithAttributes(attribute.String("service.name", service)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return Provider{}, fmt.Errorf("traces: resource: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("exporting spans failed; the work goes on", zap.Error(err))
	}))
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log.Info("exporting spans over OTLP", zap.String("endpoint", s.Endpoint), zap.String("service", service))
	return Provider{TracerProvider: sdk, sdk: sdk}, nil
}

// ShutdownTimeout bounds the flush of the buffered spans when a role stops.
const ShutdownTimeout = 5 * time.Second

// Or returns tp, or the no-op provider when tp is nil: a role's Config leaves it nil for none.
func Or(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return noop.NewTracerProvider()
	}
	return tp
}

// The attributes of atmost's spans.
const (
	DeliveryKey = attribute.Key("atmost.delivery_key")
	Account     = attribute.Key("atmost.account")
	// Outcome is what a step did: ingest's created, duplicate or the reject reason; the
	// dispatcher's and reconciler's result as their metrics count it.
	Outcome    = attribute.Key("atmost.outcome")
	State      = attribute.Key("atmost.state")
	Reason     = attribute.Key("atmost.reason")
	Attempt    = attribute.Key("atmost.attempt")
	Generation = attribute.Key("atmost.generation")
	ObjectID   = attribute.Key("atmost.object_id")
	Subject    = attribute.Key("messaging.destination.name")
	System     = attribute.Key("messaging.system")
)

// The spans of one intent, by the step each one times (docs/operating.md#traces).
const (
	// SpanStore is ingest's: one message, from its fetch to its acknowledgement; the intent
	// is stored with its context, the parent of everything after.
	SpanStore = "store"
	// SpanDispatch is the dispatcher's: one work item, from its arrival to its
	// acknowledgement or redelivery; the steps below are its children.
	SpanDispatch  = "dispatch"
	SpanBegin     = "begin"
	SpanAuthorize = "authorize"
	SpanWitness   = "witness"
	SpanSend      = "send"
	SpanReadBack  = "read-back"
	SpanComplete  = "complete"
	// SpanReconcile is the reconciler's: one turn that works an indeterminate intent; its
	// lookup and read-backs are its children.
	SpanReconcile = "reconcile"
	SpanLookup    = "lookup"
)
