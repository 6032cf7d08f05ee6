package client_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// BenchmarkPublishAll publishes b.N distinct intents (make bench: 100,000) with one client into
// ATMOST_INTENTS on an embedded NATS server in the same process, as atmost's streams configure
// it (file storage, the duplicate window): validation, key, canonical form, the publish and
// its acknowledgement, with the default MaxInFlight.
func BenchmarkPublishAll(b *testing.B) {
	ctx := context.Background()
	srv := natstest.New(b)
	srv.Streams(b)
	c, err := client.New(srv.Connect(b), client.Config{})
	require.NoError(b, err)
	intents := make([]client.Intent, b.N)
	for i := range intents {
		intents[i] = client.Intent{Account: fmt.Sprintf("acct-%d", i%8), Action: "post", Request: map[string]any{"text": fmt.Sprintf("benchmark post %d", i)}}
	}
	b.ResetTimer()
	results := c.PublishAll(ctx, intents)
	b.StopTimer()
	for _, r := range results {
		require.NoError(b, r.Err)
		require.False(b, r.Receipt.Duplicate)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "intents/s")
}

// BenchmarkStatus asks the outcome service for b.N intents (make bench: 10,000), one request
// at a time from one client, out of a ledger of 10,000 intents: the latency a producer sees,
// through NATS, the service and one ledger read, as p50 and p99.
func BenchmarkStatus(b *testing.B) {
	w := worldtest.New(b)
	require.NoError(b, w.Ledger.AddAccount(w.Ctx, ledger.Account{ID: "acct-1", Platform: "sim"}, ledger.Actor{Name: "test", Reason: "a test account"}))
	const stored = 10_000
	var keys []identity.DeliveryKey
	for i := 0; i < stored; i += 500 {
		var envs []identity.Envelope
		for j := i; j < i+500; j++ {
			env, err := post("acct-1", fmt.Sprintf("stored %d", j)).Envelope()
			require.NoError(b, err)
			envs = append(envs, env)
		}
		res, err := w.Ledger.Submit(w.Ctx, envs)
		require.NoError(b, err)
		for _, r := range res {
			require.Equal(b, ledger.Created, r.Outcome)
			keys = append(keys, r.Key)
		}
	}
	w.Exec(`ANALYZE intents`)
	(&env{World: w}).serveStatus()
	c, err := client.New(connect(b, w.NATSURL), client.Config{})
	require.NoError(b, err)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		o, err := c.Status(ctx, "acct-1", keys[i%stored])
		lat = append(lat, time.Since(start))
		if err != nil || o.State != atmosttype.Pending {
			b.Fatalf("status %d: %v %+v", i, err, o)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
