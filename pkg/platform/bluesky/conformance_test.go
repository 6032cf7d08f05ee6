package bluesky_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

// The Bluesky adapter meets the adapter contract against the fake PDS, with its clock stopped
// (createdAt is the time of Prepare).
func TestConformance(t *testing.T) {
	platformtest.Run(t, platformtest.Harness{
		Open: func(t *testing.T) (platform.Adapter, platformtest.Platform) {
			clk := newClock(t0)
			pds := newPDS(t, clk)
			return open(t, pds.URL, clk), pdsPlatform{pds}
		},
		Request: func(t *testing.T, text string) platform.Request { return platformtest.Post(t, "acct-1", text) },
	})
}

// pdsPlatform steers the fake PDS for the suite: an answer is queued for the next
// createRecord, and the records the creates made are its truth.
type pdsPlatform struct{ p *fakePDS }

const createRecord = "com.atproto.repo.createRecord"

func (pl pdsPlatform) Next(a platformtest.Answer) {
	p := pl.p
	commit := func(r *http.Request) (int, map[string]string) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.store(body)
	}
	hangUp := func(w http.ResponseWriter) {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
	}
	switch a {
	case platformtest.Accept:
	case platformtest.DropBeforeRead:
		p.onFunc(createRecord, func(w http.ResponseWriter, _ *http.Request) { hangUp(w) })
	case platformtest.DropAfterCommit:
		p.onFunc(createRecord, func(w http.ResponseWriter, r *http.Request) {
			commit(r)
			hangUp(w)
		})
	case platformtest.ErrorAfterCommit:
		p.onFunc(createRecord, func(w http.ResponseWriter, r *http.Request) {
			commit(r)
			xrpcErr(w, 500, "InternalServerError", "Internal Server Error")
		})
	case platformtest.RateLimit:
		p.onFunc(createRecord, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "1")
			xrpcErr(w, 429, "RateLimitExceeded", "Rate Limit Exceeded")
		})
	case platformtest.Refuse:
		p.on(createRecord, 400, `{"error":"InvalidRequest","message":"Invalid app.bsky.feed.post record"}`)
	case platformtest.RefuseUndeclared:
		p.on(createRecord, 404, `{"error":"XRPCNotSupported","message":"XRPCNotSupported"}`)
	case platformtest.Redirect:
		p.onFunc(createRecord, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/xrpc/"+createRecord+"?again=1", http.StatusTemporaryRedirect)
		})
	case platformtest.SuccessWithoutID:
		p.onFunc(createRecord, func(w http.ResponseWriter, r *http.Request) {
			commit(r)
			reply(w, map[string]any{"validationStatus": "valid"})
		})
	case platformtest.Slow:
		p.onFunc(createRecord, func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(platformtest.SlowBy)
			_, out := commit(r)
			reply(w, map[string]any{"uri": out["uri"], "cid": out["cid"]})
		})
	default:
		p.t.Fatalf("the fake PDS cannot play %s", a)
	}
}

// Creates are the bodies of the createRecord calls (the fake reads every body).
func (pl pdsPlatform) Creates() [][]byte {
	var out [][]byte
	for _, s := range createRecordCalls(pl.p) {
		out = append(out, s.Body)
	}
	return out
}

func (pl pdsPlatform) Requests() int { return len(pl.p.requests()) }

// Objects are the records the creates made under r's record key.
func (pl pdsPlatform) Objects(r platform.Request) []string {
	pl.p.mu.Lock()
	defer pl.p.mu.Unlock()
	var out []string
	for _, uri := range pl.p.created {
		if strings.HasSuffix(uri, "/"+bluesky.RecordKey(r.Key)) {
			out = append(out, uri)
		}
	}
	return out
}

// Edit replaces the record's text, as com.atproto.repo.putRecord would.
func (pl pdsPlatform) Edit(id, text string) {
	p := pl.p
	p.mu.Lock()
	defer p.mu.Unlock()
	rec, ok := p.records[id]
	if !ok {
		p.t.Fatalf("no record %s to edit", id)
	}
	var v map[string]any
	if err := json.Unmarshal(rec.Value, &v); err != nil {
		p.t.Fatalf("the record %s: %v", id, err)
	}
	v["text"] = text
	rec.Value, _ = json.Marshal(v)
	p.records[id] = rec
}

func (pl pdsPlatform) Delete(id string) { pl.p.remove(id) }

func (pl pdsPlatform) Down() { pl.p.Close() }

func (pl pdsPlatform) Secrets() []string {
	pl.p.mu.Lock()
	defer pl.p.mu.Unlock()
	return []string{password, pl.p.access, pl.p.refresh}
}
