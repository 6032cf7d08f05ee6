package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/atmost/atmost/pkg/platform"
)

// BenchmarkSendAndReadBack is one intent's exchanges through the adapter: the create, whose
// answer names the object, and its read-back, against a local endpoint. What it measures is
// mostly net/http's (both ends); the allocations the adapter adds are its own.
//
//	go test -run '^$' -bench SendAndReadBack -benchtime 20000x -cpu 1 ./pkg/platform/webhook/
func BenchmarkSendAndReadBack(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"obj-123456","created_at":"2026-12-04T10:00:00Z"}`))
			return
		}
		_, _ = w.Write([]byte(`{"id":"obj-123456","text":"hello","created_at":"2026-12-04T10:00:00Z"}`))
	}))
	b.Cleanup(srv.Close)
	ad := open(b, `{"url":"`+srv.URL+`/post","readback_url":"`+srv.URL+`/objects/{id}","readback_text_pointer":"/text"}`, "")
	r := request(b)
	p, err := ad.Prepare(r)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		out := ad.Send(ctx, p)
		if out.Result != platform.Sent {
			b.Fatalf("send: %+v", out)
		}
		if obj, err := ad.ReadBack(ctx, r, out.ObjectID); err != nil || obj.Text != "hello" {
			b.Fatalf("read back: %+v, %v", obj, err)
		}
	}
}
