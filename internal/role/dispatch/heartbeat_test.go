package dispatch_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/natstest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
)

// When the consumer's heartbeats stop (its leader moved to another server of the cluster, the
// server went silent), the dispatcher pulls again and keeps working: it does not stop. Its
// connection goes through a proxy that holds every byte for a while, longer than two
// heartbeats but shorter than the connection's own PINGs take to give up on it.
func TestADispatcherWhoseHeartbeatsStopKeepsWorking(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	proxy := natstest.NewProxy(t, e.NATSURL)
	nc, err := nats.Connect(proxy.URL, nats.MaxReconnects(-1))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	d, err := dispatch.New(e.Ctx, js, e.Ledger, e.Relay, dispatch.WithPullExpiry(e.config(), 2*time.Second))
	require.NoError(t, err)
	stop := e.Run(d.Run)

	before := e.Submit("acct-1", worldtest.Texts("before", 5)...)
	require.Equal(t, map[ledger.State]int{ledger.Published: 5}, states(e.settle(before, 20*time.Second)))

	proxy.Freeze()
	time.Sleep(3 * time.Second) // six heartbeats of 500 ms missed; the client gives up after two
	proxy.Thaw()

	after := e.Submit("acct-1", worldtest.Texts("after", 5)...)
	require.Equal(t, map[ledger.State]int{ledger.Published: 5}, states(e.settle(after, 20*time.Second)))
	stop() // and Run returned no error
}
