package relay_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/tracecontext"
)

// The work item and the event of an intent stored with a traceparent carry it in their
// headers, beside the message id; an intent stored without one gets no such header.
func TestTheWorkItemAndTheEventsCarryTheStoredTraceparent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	envs := envelopes(t, "traced", "untraced")
	_, err := e.l.SubmitTraced(e.ctx, envs, []string{traceparent, ""})
	require.NoError(t, err)
	_, err = relay.New(e.l, e.js, relay.Config{}).Drain(e.ctx)
	require.NoError(t, err)

	for _, stream := range []string{events.DispatchStream, events.EventsStream} {
		s, err := e.js.Stream(e.ctx, stream)
		require.NoError(t, err)
		seen := map[identity.DeliveryKey]bool{}
		for seq := uint64(1); seq <= 2; seq++ {
			m, err := s.GetMsg(e.ctx, seq)
			require.NoError(t, err)
			var body struct {
				Key identity.DeliveryKey `json:"delivery_key"`
			}
			require.NoError(t, json.Unmarshal(m.Data, &body))
			seen[body.Key] = true
			require.NotEmpty(t, m.Header.Get("Nats-Msg-Id"))
			if body.Key == envs[0].DeliveryKey() {
				require.Equal(t, traceparent, m.Header.Get(tracecontext.Header), stream)
			} else {
				require.NotContains(t, m.Header, tracecontext.Header, stream)
			}
		}
		require.Len(t, seen, 2, stream)
	}
}
