package dispatch

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
)

// WorkCount is atmost_dispatch_work_total{result} of d.
func WorkCount(d *Dispatcher, result string) float64 {
	var m dto.Metric
	if err := d.counts.works.WithLabelValues(result).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

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

// WithTakeGap returns cfg with the take of a batch ending when no work item arrived for gap
// after the latest, instead of burstGap: a test's burst then surely arrives within it.
func WithTakeGap(cfg Config, gap time.Duration) Config {
	cfg.gap = gap
	return cfg
}

// WithoutTrials returns cfg with every account warm: for the tests of how a burst is batched,
// read back and recorded, which a cold account's trial would split.
func WithoutTrials(cfg Config) Config {
	cfg.noTrials = true
	return cfg
}

// Warm reports whether d takes account as warm now (cold.go).
func Warm(d *Dispatcher, account string) bool {
	d.rate.Lock()
	defer d.rate.Unlock()
	return d.warm(account, time.Now())
}
