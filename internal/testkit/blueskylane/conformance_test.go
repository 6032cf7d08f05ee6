package blueskylane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/atmost/atmost/internal/testkit/blueskylane"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
	"github.com/atmost/atmost/pkg/platform/platformtest"
)

// The Bluesky adapter meets the adapter contract on the real PDS: one PDS for the suite, and
// for each case a FaultProxy in front of it that plays the suite's answers (a drop before the
// PDS read the createRecord, a drop, a 500 or an empty 200 after it committed the record, a
// refusal the PDS itself gives to a token it did not issue, a 429, 409 or 307 from the proxy)
// and a delivery key of the case's own (its name is the envelope's occurrence), so that no two
// cases meet under one record key. The truth is what the PDS holds, read directly.
func TestConformanceOnAPDS(t *testing.T) {
	dbtest.SkipInShortLane(t, "it starts a PDS")
	pds := blueskylane.Start(t)
	own := &ownSession{pds: pds}
	platformtest.Run(t, platformtest.Harness{
		Open: func(t *testing.T) (platform.Adapter, platformtest.Platform) {
			proxy := blueskylane.NewFaultProxy(pds.URL)
			proxy.SlowBy = platformtest.SlowBy
			t.Cleanup(proxy.Close)
			return openConformance(t, pds, proxy.URL()), &pdsPlatform{t: t, pds: pds, own: own, proxy: proxy, seen: map[identity.DeliveryKey][]string{}}
		},
		Request: func(t *testing.T, text string) platform.Request {
			t.Helper()
			req, err := json.Marshal(map[string]string{"text": text})
			if err != nil {
				t.Fatal(err)
			}
			e, err := identity.NewEnvelope(account, "post", "", req, t.Name(), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := e.Text()
			return platform.Request{Key: e.DeliveryKey(), Account: e.Account, Action: e.Action, Target: e.Target,
				Request: e.Request, Text: identity.NormalizeText(got)}
		},
		Exceptions: map[string]string{
			"Prepare/renders the same request the same way": "createdAt is the time of Prepare (in milliseconds), which this process cannot stop; " +
				"TestConformance of pkg/platform/bluesky runs this case with the adapter's clock stopped",
		},
	})
}

// openConformance opens the adapter for the lane's account through pdsURL, with the app
// password behind an env: credential reference.
func openConformance(t *testing.T, pds *blueskylane.PDS, pdsURL string) platform.Adapter {
	t.Helper()
	name := fmt.Sprintf("ATMOST_TEST_BLUESKY_APP_PASSWORD_%d_%d", os.Getpid(), credentials.Add(1))
	if err := os.Setenv(name, pds.Password); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Unsetenv(name) })
	settings, err := json.Marshal(map[string]string{"pds": pdsURL, "identifier": pds.DID, "reconcile_delay": "2s"})
	if err != nil {
		t.Fatal(err)
	}
	ad, err := bluesky.Open(platform.Account{ID: account, Platform: bluesky.Name, Settings: settings, CredentialRef: "env:" + name, CredentialVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	return ad
}

// ownSession is a session of the lane's account on the PDS itself, as a person's app would
// hold: what edits and deletes the records. One for the suite.
type ownSession struct {
	pds    *blueskylane.PDS
	mu     sync.Mutex
	access string
}

func (s *ownSession) token(t *testing.T) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.access == "" {
		var out struct {
			AccessJwt string `json:"accessJwt"`
		}
		call(t, s.pds, "com.atproto.server.createSession", "", map[string]string{"identifier": s.pds.DID, "password": s.pds.Password}, &out)
		s.access = out.AccessJwt
	}
	return s.access
}

// call makes a procedure call to the PDS directly and fails t unless it answers 200.
func call(t *testing.T, pds *blueskylane.PDS, method, bearer string, in, out any) {
	t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pds.URL+"/xrpc/"+method, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d", method, resp.StatusCode)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
}

// pdsPlatform is the suite's Platform: the real PDS behind a FaultProxy.
type pdsPlatform struct {
	t     *testing.T
	pds   *blueskylane.PDS
	own   *ownSession
	proxy *blueskylane.FaultProxy

	mu   sync.Mutex
	seen map[identity.DeliveryKey][]string // the at-uris the PDS held for a key, once seen
}

func (p *pdsPlatform) Next(a platformtest.Answer) {
	f, ok := map[platformtest.Answer]blueskylane.Fault{
		platformtest.Accept:           blueskylane.Pass,
		platformtest.DropBeforeRead:   blueskylane.FaultDropBeforeRead,
		platformtest.DropAfterCommit:  blueskylane.FaultDropAfterCommit,
		platformtest.ErrorAfterCommit: blueskylane.FaultErrorAfterCommit,
		platformtest.RateLimit:        blueskylane.FaultRateLimit,
		platformtest.Refuse:           blueskylane.FaultBadToken,
		platformtest.RefuseUndeclared: blueskylane.FaultConflict,
		platformtest.Redirect:         blueskylane.FaultRedirect,
		platformtest.SuccessWithoutID: blueskylane.FaultSuccessWithoutID,
		platformtest.Slow:             blueskylane.FaultSlow,
	}[a]
	if !ok {
		p.t.Fatalf("the PDS harness cannot play %s", a)
	}
	p.proxy.Next(f)
}

func (p *pdsPlatform) Creates() [][]byte { return p.proxy.Creates() }

func (p *pdsPlatform) Requests() int { return p.proxy.Requests() }

// Objects is the record under r's record key, read from the PDS, and the one seen there
// before when it has been deleted since.
func (p *pdsPlatform) Objects(r platform.Request) []string {
	uri := "at://" + p.pds.DID + "/" + posts + "/" + bluesky.RecordKey(r.Key)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := url.Values{"repo": {p.pds.DID}, "collection": {posts}, "rkey": {bluesky.RecordKey(r.Key)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.pds.URL+"/xrpc/com.atproto.repo.getRecord?"+q.Encode(), nil)
	if err != nil {
		p.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	_ = resp.Body.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case resp.StatusCode == http.StatusOK && !slices.Contains(p.seen[r.Key], uri):
		p.seen[r.Key] = append(p.seen[r.Key], uri)
	case resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusBadRequest:
		p.t.Fatalf("getRecord %s: status %d", uri, resp.StatusCode)
	}
	return slices.Clone(p.seen[r.Key])
}

// rkeyOf is the record key of one of the account's posts, by its at-uri.
func (p *pdsPlatform) rkeyOf(id string) string {
	prefix := "at://" + p.pds.DID + "/" + posts + "/"
	if !strings.HasPrefix(id, prefix) {
		p.t.Fatalf("%s is no post of the lane's account", id)
	}
	return strings.TrimPrefix(id, prefix)
}

// Edit replaces the post's text, as an app's edit would (putRecord of the record with its new
// text).
func (p *pdsPlatform) Edit(id, text string) {
	rkey := p.rkeyOf(id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	q := url.Values{"repo": {p.pds.DID}, "collection": {posts}, "rkey": {rkey}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.pds.URL+"/xrpc/com.atproto.repo.getRecord?"+q.Encode(), nil)
	if err != nil {
		p.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	var rec struct {
		Value map[string]any `json:"value"`
	}
	err = json.NewDecoder(resp.Body).Decode(&rec)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		p.t.Fatalf("getRecord %s: status %d, %v", id, resp.StatusCode, err)
	}
	rec.Value["text"] = text
	call(p.t, p.pds, "com.atproto.repo.putRecord", p.own.token(p.t), map[string]any{"repo": p.pds.DID, "collection": posts, "rkey": rkey, "record": rec.Value}, nil)
}

func (p *pdsPlatform) Delete(id string) {
	call(p.t, p.pds, "com.atproto.repo.deleteRecord", p.own.token(p.t), map[string]string{"repo": p.pds.DID, "collection": posts, "rkey": p.rkeyOf(id)}, nil)
}

func (p *pdsPlatform) Down() { p.proxy.Close() }

func (p *pdsPlatform) Secrets() []string {
	return append([]string{p.pds.Password, p.own.token(p.t)}, p.proxy.Tokens()...)
}
