package ingest_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/testkit/roletest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// collector is an OTLP/HTTP endpoint that keeps the spans it receives, with their service.
type collector struct {
	mu    sync.Mutex
	spans []collectedSpan
}

type collectedSpan struct {
	service string
	span    *tracepb.Span
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP/HTTP trace export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans = append(c.spans, collectedSpan{service, s})
			}
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *collector) named(name string) []collectedSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []collectedSpan
	for _, s := range c.spans {
		if s.span.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Configured by OTEL_EXPORTER_OTLP_ENDPOINT alone, the ingest role exports its store span over
// OTLP/HTTP, a child of the producer's span named in the message's traceparent, as
// atmost-ingest, and stores the intent with that span's context; the spans still buffered go
// out when the role stops.
func TestTheIngestRoleExportsItsSpansWhereTheEnvironmentSays(t *testing.T) {
	t.Parallel()
	c := &collector{}
	otlp := httptest.NewServer(c)
	t.Cleanup(otlp.Close)
	db := dbtest.New(t)
	_, err := db.Pool.Exec(context.Background(), `INSERT INTO accounts (account_id, platform) VALUES ('acct-1', 'sim')`)
	require.NoError(t, err)
	srv := natstest.New(t)
	r := roletest.Start(t, ingest.Main, map[string]string{"ATMOST_DATABASE_URL": db.AppURL(), "ATMOST_NATS_URL": srv.URL,
		"OTEL_EXPORTER_OTLP_ENDPOINT": otlp.URL})
	r.WaitReady(t)

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	msg := nats.NewMsg(events.IntentSubject("acct-1"))
	msg.Data = []byte(post("traced through the role"))
	msg.Header.Set(tracecontext.Header, fmt.Sprintf("00-%s-%s-01", traceID, parentID))
	require.NoError(t, srv.Connect(t).PublishMsg(msg))
	var stored string
	require.Eventually(t, func() bool {
		return db.Pool.QueryRow(context.Background(), `SELECT coalesce(traceparent, '') FROM intents`).Scan(&stored) == nil
	}, 20*time.Second, 50*time.Millisecond, "the intent is stored")
	r.Stop(t)

	spans := c.named("store")
	require.Len(t, spans, 1, "the store span was exported when the role stopped")
	s := spans[0]
	require.Equal(t, "atmost-ingest", s.service)
	require.Equal(t, traceID, hex.EncodeToString(s.span.TraceId), "the producer's trace")
	require.Equal(t, parentID, hex.EncodeToString(s.span.ParentSpanId), "a child of the producer's span")
	require.Equal(t, fmt.Sprintf("00-%s-%s-01", traceID, hex.EncodeToString(s.span.SpanId)), stored)
	require.Contains(t, r.Stderr(), "exporting spans over OTLP")
}

// A tracing setting the role cannot honour stops it at start with exit code 2, naming it.
func TestTheIngestRoleRefusesTracingItCannotHonour(t *testing.T) {
	t.Parallel()
	for env, want := range map[string]string{
		"OTEL_TRACES_EXPORTER=zipkin":      "OTEL_TRACES_EXPORTER",
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc": "grpc",
	} {
		name, value, _ := bytes.Cut([]byte(env), []byte("="))
		vars := map[string]string{string(name): string(value), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
		var stderr bytes.Buffer
		code := ingest.Main(context.Background(), nil, func(n string) (string, bool) { v, ok := vars[n]; return v, ok }, &stderr)
		require.Equal(t, 2, code, env)
		require.Contains(t, stderr.String(), want, env)
	}
}
