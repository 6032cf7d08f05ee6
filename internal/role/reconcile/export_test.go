package reconcile

import (
	"time"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"

	"github.com/nats-io/nats.go/jetstream"
)

// SetCrash sets the process-wide crash point (the subprocess tests SIGKILL themselves there).
func SetCrash(f func(step string)) { crash = f }

// WithHook returns cfg with a hook called at each crash point of this reconciler.
func WithHook(cfg Config, f func(step string)) Config {
	cfg.hook = f
	return cfg
}

// WithPullExpiry returns cfg with the reconciler's pull requests expiring after expiry and
// heartbeats every quarter of it: a missed heartbeat shows after half of it.
func WithPullExpiry(cfg Config, expiry time.Duration) Config {
	cfg.pull = []jetstream.PullMessagesOpt{jetstream.PullExpiry(expiry), jetstream.PullHeartbeat(expiry / 4)}
	return cfg
}

// Hold makes r hold an unconfirmed claim of attempt's lookup of key with token, as a turn
// whose claim's answer was lost leaves it.
func Hold(r *Reconciler, key identity.DeliveryKey, token ledger.ClaimToken, attempt identity.AttemptToken) {
	r.hold(key, &heldLookup{token: token, attempt: attempt})
}
