package reconcile_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
)

// When the consumer's heartbeats stop (its leader moved to another server of the cluster, the
// server went silent), the reconciler pulls again and keeps reconciling from events: it does
// not stop. Its connection goes through a proxy that holds every byte for a while, longer than
// two heartbeats but shorter than the connection's own PINGs take to give up on it; the scan
// is an hour away, so only the events can bring the unknown outcomes to it.
func TestAReconcilerWhoseHeartbeatsStopKeepsWorking(t *testing.T) {
	t.Parallel()
	lost := platformsim.FaultDropAfterCommit // created, the answer lost: unknown, found by the lookup
	e := newEnv(t, platformsim.Config{Plan: platformsim.Plan{Script: []platformsim.Fault{lost, lost, lost, lost}}})
	proxy := natstest.NewProxy(t, e.NATSURL)
	nc, err := nats.Connect(proxy.URL, nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	r, err := reconcile.New(e.Ctx, js, e.Ledger, relay.New(e.Ledger, e.JS, relay.Config{}), reconcile.WithPullExpiry(e.config(), 2*time.Second))
	require.NoError(t, err)
	stop := e.Run(r.Run)

	for _, phase := range []string{"before", "after"} {
		keys := e.dispatched(worldtest.Texts(phase, 2)...)
		for k, in := range e.settle(keys, 20*time.Second) {
			require.Equal(t, ledger.Published, in.State, "%s %s", phase, k)
			require.Equal(t, ledger.ReasonReconciledFound, in.Reason, "%s %s", phase, k)
		}
		if phase == "before" {
			proxy.Freeze()
			time.Sleep(3 * time.Second) // six heartbeats of 500 ms missed; the client gives up after two
			proxy.Thaw()
		}
	}
	stop() // and Run returned no error
}
