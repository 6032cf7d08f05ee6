package relay_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
)

// BenchmarkRelayDrain publishes b.N transitions (creations, each also a work item) from the
// outbox to JetStream.
func BenchmarkRelayDrain(b *testing.B) {
	e := newEnvTB(b)
	for start := 0; start < b.N; start += 500 {
		var texts []string
		for i := start; i < min(start+500, b.N); i++ {
			texts = append(texts, fmt.Sprintf("bench %d", i))
		}
		_, err := e.l.Submit(e.ctx, envelopes(b, texts...))
		require.NoError(b, err)
	}
	r := relay.New(e.l, e.js, relay.Config{})
	b.ResetTimer()
	n, err := r.Drain(e.ctx)
	b.StopTimer()
	require.NoError(b, err)
	require.Equal(b, b.N, n)
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
}
