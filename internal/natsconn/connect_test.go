package natsconn_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/natsconn"
	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/natstest"
)

// A server that stops answering but keeps its connections open (paused, frozen) is left for
// another server of the URL list within seconds, not the minutes nats.go's default PINGs take.
func TestARoleLeavesANATSServerThatStopsAnswering(t *testing.T) {
	dbtest.SkipInShortLane(t, "it waits out three unanswered PINGs, about 15 s")
	t.Parallel()
	a, b := natstest.NewProxy(t, natstest.New(t).URL), natstest.NewProxy(t, natstest.New(t).URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc, err := natsconn.Connect(ctx, "test", a.URL+","+b.URL, zap.NewNop())
	require.NoError(t, err)
	defer nc.Close()
	stuck, other := a, b
	if nc.ConnectedUrl() == b.URL {
		stuck, other = b, a
	}
	stuck.Freeze()
	defer stuck.Thaw()
	// Three PINGs unanswered at 5 s each, and some room.
	require.Eventually(t, func() bool { return nc.IsConnected() && nc.ConnectedUrl() == other.URL }, 30*time.Second, 100*time.Millisecond,
		"still on %s", nc.ConnectedUrl())
}

// A role that cannot connect logs the URL it tries, and the error it gives up with names it:
// never with its password or token, which the server's log readers must not learn.
func TestARoleNeverLogsTheSecretOfItsNATSURL(t *testing.T) {
	t.Parallel()
	srv := natstest.NewWithConfig(t, `authorization { token: "the-right-one" }`)
	host := strings.TrimPrefix(srv.URL, "nats://")
	for _, url := range []string{"nats://atmost:pw-s3cret@" + host, "nats://tok-s3cret@" + host} {
		var logs bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := natsconn.Connect(ctx, "test", url, role.Logger(&logs))
		cancel()
		require.Error(t, err)
		require.Contains(t, logs.String(), "connect to NATS at nats://", "the attempt is logged")
		require.Contains(t, logs.String(), "xxxxx@"+host)
		require.NotContains(t, logs.String(), "s3cret")
		require.NotContains(t, err.Error(), "s3cret")
	}
}
