package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/ledger"
)

// stack is the ingest role (with its HTTP API) and, when asked, the dispatcher role, each run
// in this process as its binary runs it, on a ledger of their own and an embedded JetStream,
// with the account acct-1 on the platform simulator, without a rate limit, and a producer
// token for it.
type stack struct {
	api, token string
	nc         *client.Client
	http       *http.Client
}

func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	addr := ln.Addr().String()
	require.NoError(b, ln.Close())
	return addr
}

func startStack(b *testing.B, dispatcher bool) *stack {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db := dbtest.New(b)
	srv := natstest.New(b)
	sim, err := platformsim.New(platformsim.Config{})
	require.NoError(b, err)
	simURL, _, err := sim.Serve(ctx, "127.0.0.1:0")
	require.NoError(b, err)
	l, err := ledger.New(db.Pool, ledger.Config{})
	require.NoError(b, err)
	require.NoError(b, l.AddAccount(ctx, ledger.Account{ID: "acct-1", Platform: "sim", Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, simURL))}, ledger.Actor{Name: "user:bench", Reason: "bench"}))
	unlimited := 0 // the default policy's 60 a minute would pace the run, not measure it
	_, err = l.SetPolicy(ctx, "acct-1", ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "user:bench", Reason: "no rate limit"})
	require.NoError(b, err)
	token, err := l.AddProducer(ctx, "bench", []string{"acct-1"}, ledger.Actor{Name: "user:bench", Reason: "bench"})
	require.NoError(b, err)

	api := freeAddr(b)
	env := map[string]string{"ATMOST_DATABASE_URL": db.AppURL(), "ATMOST_NATS_URL": srv.URL, "ATMOST_HTTP_ADDR": "127.0.0.1:0", "ATMOST_LOG_LEVEL": "warn"}
	getenv := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	var wg sync.WaitGroup
	wg.Go(func() { ingest.Main(ctx, []string{"--http-api", api}, getenv, io.Discard) })
	if dispatcher {
		wg.Go(func() { dispatch.Main(ctx, nil, getenv, io.Discard) })
	}
	b.Cleanup(func() { cancel(); wg.Wait() })
	s := &stack{api: "http://" + api, token: token,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	s.nc, err = client.New(srv.Connect(b), client.Config{})
	require.NoError(b, err)
	require.Eventually(b, func() bool {
		resp, err := s.http.Get(s.api + "/v1/intents")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}, 30*time.Second, 20*time.Millisecond, "the HTTP API never answered")
	return s
}

// postIntent posts one envelope and returns its key.
func (s *stack) postIntent(ctx context.Context, body string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.api+"/v1/intents", bytes.NewBufferString(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var r struct {
		Key string `json:"delivery_key"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("status %d: %v", resp.StatusCode, err)
	}
	return r.Key, nil
}

// BenchmarkPublishRate publishes b.N distinct intents (make bench: 20,000) from 16 producers at
// once, each waiting for its answer before the next: over HTTP (the answer is the 202, given
// once JetStream stored the message, after the token's and the key's ledger reads) and over
// NATS (the Go client's Publish, answered by JetStream's acknowledgement), with ingest taking
// them into the ledger meanwhile.
func BenchmarkPublishRate(b *testing.B) {
	const producers = 16
	for _, path := range []string{"http", "nats"} {
		b.Run("path="+path, func(b *testing.B) {
			s := startStack(b, false)
			ctx := context.Background()
			var next atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, producers)
			b.ResetTimer()
			for range producers {
				wg.Go(func() {
					for {
						i := next.Add(1) - 1
						if i >= int64(b.N) {
							return
						}
						text := fmt.Sprintf("rate %s %d", path, i)
						var err error
						if path == "http" {
							_, err = s.postIntent(ctx, fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":%q}}`, text))
						} else {
							_, err = s.nc.Publish(ctx, client.Intent{Account: "acct-1", Action: "post", Request: map[string]any{"text": text}})
						}
						if err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "intents/s")
		})
	}
}

// BenchmarkPublishToOutcome publishes b.N intents (make bench: 1,000) one at a time and waits
// for each to be published on the platform simulator, through ingest, the dispatcher and the
// relay: over HTTP (POST, then GET ?wait=30s) and over NATS (the Go client's Publish, then
// Await), as p50 and p99 of the time from the publish to the producer's knowing the outcome.
func BenchmarkPublishToOutcome(b *testing.B) {
	for _, path := range []string{"http", "nats"} {
		b.Run("path="+path, func(b *testing.B) {
			s := startStack(b, true)
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				text := fmt.Sprintf("outcome %s %d", path, i)
				start := time.Now()
				state, err := s.publishAndWait(ctx, path, text)
				lat = append(lat, time.Since(start))
				if err != nil || state != "published" {
					b.Fatalf("intent %d: %s %v", i, state, err)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

func (s *stack) publishAndWait(ctx context.Context, path, text string) (string, error) {
	if path == "nats" {
		r, err := s.nc.Publish(ctx, client.Intent{Account: "acct-1", Action: "post", Request: map[string]any{"text": text}})
		if err != nil {
			return "", err
		}
		o, err := s.nc.Await(ctx, r.Account, r.Key)
		return string(o.State), err
	}
	key, err := s.postIntent(ctx, fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":%q}}`, text))
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.api+"/v1/intents/"+key+"?wait=30s", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := s.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var o client.Outcome
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return "", err
	}
	return string(o.State), nil
}
