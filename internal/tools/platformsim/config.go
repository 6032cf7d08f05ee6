package platformsim

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Config configures a Server. The zero value is a fast, consistent platform without faults,
// without an idempotency-status endpoint and without deduplication.
type Config struct {
	// Latency is added to every create before it commits, to emulate a slow platform. While
	// it runs the create is in progress (GET /v1/idempotency answers in_progress). Default 0.
	Latency time.Duration
	// ListLag is how long after its creation an object stays out of the per-account listing
	// (an eventually consistent index); GET /v1/objects/{id} sees it at once. Default 0.
	ListLag time.Duration
	// StatusLookup enables GET /v1/idempotency/{key}, the status lookup keyed by the original
	// request. Default false: the endpoint answers 404.
	StatusLookup bool
	// Dedupe makes a create whose Idempotency-Key already created an object answer that object
	// with 200 instead of creating another. Default false, so that a double send shows as two
	// objects.
	Dedupe bool
	// Plan is the initial fault plan. Default: no faults.
	Plan Plan
	// Logger receives one line per injected fault and per plan change; nil means no logging.
	Logger *zap.Logger
}

func (c Config) validate() error {
	switch {
	case c.Latency < 0:
		return fmt.Errorf("%w: latency %s: must not be negative", ErrInvalidConfig, c.Latency)
	case c.ListLag < 0:
		return fmt.Errorf("%w: list lag %s: must not be negative", ErrInvalidConfig, c.ListLag)
	}
	if err := c.Plan.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}
