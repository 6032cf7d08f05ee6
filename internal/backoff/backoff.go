// Package backoff waits out what a role cannot work without at start-up (NATS, the streams, a
// consumer): Retry tries again with a doubling pause until the operation succeeds, the
// context ends, or waiting cannot help.
package backoff

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/streams"
)

// Retry runs op until it succeeds or ctx ends, doubling its pause up to 10 s. An incompatible
// stream or a server too old is returned at once: waiting will not fix it.
func Retry(ctx context.Context, log *zap.Logger, what string, op func() error) error {
	pause := 100 * time.Millisecond
	for {
		err := op()
		if err == nil {
			return nil
		}
		if errors.Is(err, streams.ErrIncompatible) || errors.Is(err, streams.ErrServerTooOld) {
			return err
		}
		log.Warn(what+" failed; retrying", zap.Error(err), zap.Duration("in", pause))
		if !Sleep(ctx, pause) {
			return fmt.Errorf("%s: %w (gave up: %v)", what, err, ctx.Err())
		}
		pause = min(2*pause, 10*time.Second)
	}
}

// Sleep pauses for d, or until ctx ends; it reports whether the pause ran out.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
