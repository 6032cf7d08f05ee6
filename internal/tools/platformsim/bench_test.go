package platformsim_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/atmost/atmost/internal/tools/platformsim"
)

// BenchmarkCreate measures creates over real HTTP on loopback, from parallel keep-alive
// clients: the simulator must not be what limits an end-to-end test.
func BenchmarkCreate(b *testing.B) {
	s, err := platformsim.New(platformsim.Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	url, stopped, err := s.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { cancel(); <-stopped }()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	body := []byte(`{"action":"post","request":{"text":"hello"},"target":"","text":"hello"}`)
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, url+"/v1/accounts/acct/post", bytes.NewReader(body))
			req.Header.Set("Idempotency-Key", "dk1:"+strconv.FormatInt(n.Add(1), 10))
			resp, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	if got := s.Counts().Objects; int64(got) != n.Load() {
		b.Fatalf("%d objects for %d creates", got, n.Load())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}
