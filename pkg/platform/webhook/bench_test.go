package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/atmost/atmost/pkg/platform"
)

// benchPlatform answers a create with the object's id and a read-back with its text, for the
// benchmarks' exchanges.
func benchPlatform(b *testing.B) *httptest.Server {
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
	return srv
}

// BenchmarkSendAndReadBack is one intent's exchanges through the adapter: the create, whose
// answer names the object, and its read-back, against a local endpoint. What it measures is
// mostly net/http's (both ends); the allocations the adapter adds are its own.
//
//	go test -run '^$' -bench SendAndReadBack -benchtime 20000x -cpu 1 ./pkg/platform/webhook/
func BenchmarkSendAndReadBack(b *testing.B) {
	srv := benchPlatform(b)
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

// BenchmarkPlainPostAndGet is BenchmarkSendAndReadBack's exchanges made by a plain net/http
// client, as an at-least-once worker makes them (a JSON body, an Idempotency-Key, the answers
// decoded by encoding/json), against the same endpoint: the floor the adapter is held to. What
// the adapter adds (tracing every exchange to tell whether a byte may have left, the request's
// hash checked before the send, the answer read along its JSON pointer) shows as the difference.
//
//	go test -run '^$' -bench 'SendAndReadBack|PlainPostAndGet' -benchtime 20000x -cpu 1 -count 3 ./pkg/platform/webhook/
func BenchmarkPlainPostAndGet(b *testing.B) {
	srv := benchPlatform(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	body := []byte(`{"account":"acct-1","text":"hello"}`)
	exchange := func(req *http.Request, v any) {
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/post", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "dk1:7a1c")
		var created struct{ ID string }
		exchange(req, &created)
		if req, err = http.NewRequest(http.MethodGet, srv.URL+"/objects/"+created.ID, nil); err != nil {
			b.Fatal(err)
		}
		var read struct{ Text string }
		if exchange(req, &read); read.Text != "hello" {
			b.Fatalf("read back %q", read.Text)
		}
	}
}
