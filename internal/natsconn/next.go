package natsconn

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Next returns the next message of a pull consumer's iterator, or the error that ended it.
// A missed heartbeat does not end it: the consumer's pull request was lost (its leader moved
// to another server of a cluster, or the server went silent), and the iterator, which resets
// what it counted pending and pulls again, stays usable; Next logs it and waits on. Only an
// iterator that was stopped, a connection closed for good or a consumer deleted end it.
func Next(it jetstream.MessagesContext, log *zap.Logger) (jetstream.Msg, error) {
	for {
		m, err := it.Next()
		if errors.Is(err, jetstream.ErrNoHeartbeat) {
			log.Warn("the consumer's heartbeats stopped (a leader change, a silent server); pulling again", zap.Error(err))
			continue
		}
		return m, err
	}
}
