package dispatch

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SetCrash makes the dispatcher call f at each crash point (tests only).
func SetCrash(f func(step string)) { crash = f }

// WithHook returns cfg with f called at each crash point of the dispatcher it configures.
func WithHook(cfg Config, f func(step string)) Config {
	cfg.hook = f
	return cfg
}

// WithPullExpiry returns cfg with the dispatcher's pull requests expiring after expiry and
// heartbeats every quarter of it: a missed heartbeat shows after half of it.
func WithPullExpiry(cfg Config, expiry time.Duration) Config {
	cfg.pull = []jetstream.PullMessagesOpt{jetstream.PullExpiry(expiry), jetstream.PullHeartbeat(expiry / 4)}
	return cfg
}
