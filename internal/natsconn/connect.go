package natsconn

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/backoff"
	"github.com/atmost/atmost/internal/redact"
)

// A role's NATS connection PINGs its server every natsPingInterval and counts it stale, and
// reconnects (to another server of ATMOST_NATS_URL when it lists several), when
// natsMaxPingsOut PINGs in a row went unanswered. A server that stops answering without
// closing its connections (a paused or frozen process, a host cut off without a reset) is left
// within about (natsMaxPingsOut+1) x natsPingInterval, 15 s. With nats.go's defaults (every
// 2 minutes, 2 unanswered) a role stayed on it 4 to 6 minutes, publishing, acknowledging and
// taking no work through it, while the rest of the cluster worked.
const (
	natsPingInterval = 5 * time.Second
	natsMaxPingsOut  = 2
)

// Connect connects, waiting with backoff while the server is unreachable at start-up; once
// connected, nats.go reconnects by itself for as long as the process lives, and the role logs
// each disconnection and reconnection.
func Connect(ctx context.Context, name, url string, log *zap.Logger) (*nats.Conn, error) {
	var nc *nats.Conn
	err := backoff.Retry(ctx, log, "connect to NATS at "+redact.URL(url), func() (err error) {
		nc, err = nats.Connect(url, natsOptions(name, log)...)
		return err
	})
	return nc, err
}

func natsOptions(name string, log *zap.Logger) []nats.Option {
	return []nats.Option{
		nats.Name("atmost-" + name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(false),
		nats.PingInterval(natsPingInterval), nats.MaxPingsOutstanding(natsMaxPingsOut),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil { // nil: the role closed it
				log.Warn("disconnected from NATS; reconnecting", zap.Error(err))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to NATS", zap.String("server", nc.ConnectedUrlRedacted()))
		}),
	}
}
