// Package simplatform is the platform simulator behind a thin front, as the conformance suite
// (pkg/platform/platformtest) needs a platform: it plays what the simulator has no fault for (a
// redirect, a success without an id) and what an account does to its objects (edits, deletes),
// and counts what arrives. The simulator's own faults play the rest. The simulator adapter's
// conformance test and the example adapter's (examples/adapter) both run on it.
package simplatform

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

// Platform is a platformtest.Platform: the simulator behind the front. It ends with its test.
type Platform struct {
	sim *platformsim.Server
	srv *httptest.Server
	t   *testing.T

	mu       sync.Mutex
	next     platformtest.Answer // an answer the front plays
	creates  [][]byte
	requests int
	edited   map[string]string
	deleted  map[string]bool
}

// New starts a simulator with cfg behind the front.
func New(t *testing.T, cfg platformsim.Config) *Platform {
	s, err := platformsim.New(cfg)
	require.NoError(t, err)
	pl := &Platform{sim: s, t: t, edited: map[string]string{}, deleted: map[string]bool{}}
	pl.srv = httptest.NewServer(http.HandlerFunc(pl.serve))
	t.Cleanup(pl.srv.Close)
	return pl
}

// URL is the front's base URL, an account's "url" setting.
func (pl *Platform) URL() string { return pl.srv.URL }

// faults are the answers the simulator plays itself.
var faults = map[platformtest.Answer]platformsim.Plan{
	platformtest.DropBeforeRead:   {Script: []platformsim.Fault{platformsim.FaultDropBeforeRead}},
	platformtest.DropAfterCommit:  {Script: []platformsim.Fault{platformsim.FaultDropAfterCommit}},
	platformtest.ErrorAfterCommit: {Script: []platformsim.Fault{platformsim.FaultErrorAfterCommit}},
	platformtest.RateLimit:        {Script: []platformsim.Fault{platformsim.FaultRateLimited}},
	platformtest.Refuse:           {Script: []platformsim.Fault{platformsim.FaultReject}},
	platformtest.RefuseUndeclared: {Script: []platformsim.Fault{platformsim.FaultReject}, DefinitiveStatus: http.StatusConflict},
	platformtest.Slow:             {Script: []platformsim.Fault{platformsim.FaultDelay}, Delay: platformtest.SlowBy},
}

func (pl *Platform) Next(a platformtest.Answer) {
	switch plan, ok := faults[a]; {
	case ok:
		require.NoError(pl.t, pl.sim.SetPlan(plan))
	case a == platformtest.Redirect || a == platformtest.SuccessWithoutID:
		pl.mu.Lock()
		pl.next = a
		pl.mu.Unlock()
	case a != platformtest.Accept:
		pl.t.Fatalf("the simulator cannot play %s", a)
	}
}

func (pl *Platform) serve(w http.ResponseWriter, r *http.Request) {
	pl.mu.Lock()
	pl.requests++
	pl.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/accounts/"):
		pl.create(w, r)
	case r.Method == http.MethodGet && (strings.HasPrefix(r.URL.Path, "/v1/objects") || strings.HasSuffix(r.URL.Path, "/objects")):
		pl.read(w, r)
	default:
		pl.sim.Handler().ServeHTTP(w, r)
	}
}

// capture records what the simulator reads of a create's body.
type capture struct {
	io.ReadCloser
	pl *Platform
	i  int
}

func (c capture) Read(b []byte) (int, error) {
	n, err := c.ReadCloser.Read(b)
	c.pl.mu.Lock()
	c.pl.creates[c.i] = append(c.pl.creates[c.i], b[:n]...)
	c.pl.mu.Unlock()
	return n, err
}

func (pl *Platform) create(w http.ResponseWriter, r *http.Request) {
	pl.mu.Lock()
	a := pl.next
	pl.next = platformtest.Accept
	i := len(pl.creates)
	pl.creates = append(pl.creates, nil)
	pl.mu.Unlock()
	switch a {
	case platformtest.Redirect:
		// The same create URL: a client that followed it would create the object there.
		w.Header().Set("Location", r.URL.String())
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	case platformtest.SuccessWithoutID:
		r.Body = capture{r.Body, pl, i}
		pl.sim.Handler().ServeHTTP(httptest.NewRecorder(), r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"created":true}`+"\n")
		return
	}
	r.Body = capture{r.Body, pl, i}
	pl.sim.Handler().ServeHTTP(w, r) // the dropping faults hijack the connection itself
}

// read serves the reads of objects (one, grouped, the account's listing) with the edits and
// deletes applied.
func (pl *Platform) read(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	pl.sim.Handler().ServeHTTP(rec, r)
	body := rec.Body.Bytes()
	status := rec.Code
	if status == http.StatusOK {
		pl.mu.Lock()
		var one platformsim.Object
		var many struct {
			Objects []platformsim.Object `json:"objects"`
		}
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1/objects/") && json.Unmarshal(body, &one) == nil:
			if pl.deleted[one.ID] {
				status, body = http.StatusNotFound, []byte(`{"error":"no such object"}`+"\n")
				break
			}
			if text, ok := pl.edited[one.ID]; ok {
				one.Text = text
			}
			body, _ = json.Marshal(one)
		case json.Unmarshal(body, &many) == nil:
			kept := []platformsim.Object{}
			for _, o := range many.Objects {
				if pl.deleted[o.ID] {
					continue
				}
				if text, ok := pl.edited[o.ID]; ok {
					o.Text = text
				}
				kept = append(kept, o)
			}
			many.Objects = kept
			body, _ = json.Marshal(many)
		}
		pl.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (pl *Platform) Creates() [][]byte {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out := make([][]byte, len(pl.creates))
	for i, b := range pl.creates {
		out[i] = bytes.Clone(b)
	}
	return out
}

func (pl *Platform) Requests() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.requests
}

func (pl *Platform) Objects(r platform.Request) []string {
	var ids []string
	for _, o := range pl.sim.Objects(r.Key.String()) {
		ids = append(ids, o.ID)
	}
	return ids
}

func (pl *Platform) Edit(id, text string) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.edited[id] = text
}

func (pl *Platform) Delete(id string) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.deleted[id] = true
}

func (pl *Platform) Down() { pl.srv.Close() }

func (pl *Platform) Secrets() []string { return nil }
