package tracing_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/tracing"
)

func envOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) { v, ok := vars[name]; return v, ok }
}

// No exporter unless the standard variables ask for one; an endpoint alone asks; a traces
// endpoint wins over the base URL, which gets /v1/traces; the SDK switch wins over everything.
func TestTheEnvironmentDecidesTheExporter(t *testing.T) {
	for _, c := range []struct {
		name     string
		vars     map[string]string
		exporter string
		endpoint string
	}{
		{"nothing set", nil, tracing.None, ""},
		{"empty values", map[string]string{"OTEL_TRACES_EXPORTER": "", "OTEL_EXPORTER_OTLP_ENDPOINT": ""}, tracing.None, ""},
		{"otlp without an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, tracing.OTLP, ""},
		{"an endpoint alone", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318/"}, tracing.OTLP, "http://127.0.0.1:4318/v1/traces"},
		{"a traces endpoint wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/spans"}, tracing.OTLP, "http://b:4318/spans"},
		{"none wins over an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318"}, tracing.None, "http://a:4318/v1/traces"},
		{"the SDK disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, tracing.None, ""},
	} {
		s := tracing.FromEnv(envOf(c.vars))
		require.NoError(t, s.Validate(), c.name)
		require.Equal(t, c.exporter, s.Exporter, c.name)
		require.Equal(t, c.endpoint, s.Endpoint, c.name)
	}
}

// What a role cannot honour stops it at start: an exporter other than otlp or none, a
// protocol not built in.
func TestTheEnvironmentIsHeldToWhatIsBuiltIn(t *testing.T) {
	for _, vars := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_TRACES_EXPORTER": "otlp,console"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"},
	} {
		s := tracing.FromEnv(envOf(vars))
		require.Error(t, s.Validate(), "%v", vars)
		_, err := tracing.NewProvider(context.Background(), "ingest", s, zap.NewNop())
		require.Error(t, err, "%v", vars)
	}
	require.NoError(t, tracing.FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})).Validate(),
		"a protocol matters only when spans are exported")
}

// Without an exporter the provider is the no-op one and has nothing to flush; with one it
// exports and flushes on Shutdown.
func TestTheProviderExportsOnlyWhenTold(t *testing.T) {
	p, err := tracing.NewProvider(context.Background(), "ingest", tracing.FromEnv(envOf(nil)), zap.NewNop())
	require.NoError(t, err)
	require.False(t, p.Exporting())
	require.NoError(t, p.Shutdown(context.Background()))
	p, err = tracing.NewProvider(context.Background(), "ingest", tracing.FromEnv(envOf(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"})), zap.NewNop())
	require.NoError(t, err)
	require.True(t, p.Exporting())
	require.NoError(t, p.Shutdown(context.Background()), "nothing buffered, nothing to send")
}

// --help lists every variable, one a line, as the configuration page's check reads them.
func TestUsageListsEveryVariable(t *testing.T) {
	var b bytes.Buffer
	tracing.Usage(&b)
	for _, v := range tracing.Variables {
		require.Contains(t, b.String(), "\n  "+v.Name+"  ")
	}
}
