package relay_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/pkg/identity"
)

// BenchmarkRelayDrain publishes b.N transitions (creations, each also a work item) from the
// outbox to JetStream.
func BenchmarkRelayDrain(b *testing.B) {
	e := newEnvTB(b)
	for start := 0; start < b.N; start += 500 {
		var envs []identity.Envelope
		for i := start; i < min(start+500, b.N); i++ {
			req, _ := json.Marshal(map[string]string{"text": fmt.Sprintf("bench %d", i)})
			env, err := identity.NewEnvelope("acct.1", "post", "", req, "", nil)
			require.NoError(b, err)
			envs = append(envs, env)
		}
		_, err := e.l.Submit(e.ctx, envs)
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
