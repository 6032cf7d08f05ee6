package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/pkg/platform"
)

// stage resolves each reply whose adapter is a platform.ReplyResolver and prepares it, then runs
// each work's platform.Stager (Bluesky's image uploads), before any attempt is begun, concurrently, each within SendTimeout. A work whose staging failed is given back to
// JetStream after GateDelay with no attempt opened: nothing was sent, and staging again is
// safe. One the adapter says can never stage (platform.ErrUnsendable) is returned for parking.
func (d *Dispatcher) stage(stop context.Context, batch []*work) (keep, unsendable []*work) {
	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	for i, w := range batch {
		st, ok := w.adapter.(platform.Stager)
		if !ok && !w.resolve {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(stop, d.cfg.SendTimeout)
			defer cancel()
			start := time.Now()
			if w.resolve {
				// A reply's parent, read from the platform before anything is prepared.
				if errs[i] = d.resolveReply(ctx, w); errs[i] != nil || !ok {
					return
				}
			}
			errs[i] = st.Stage(ctx, w.request)
			d.log.Debug("staged", zap.Stringer("delivery_key", w.intent.Key), zap.Duration("took", time.Since(start)), zap.Error(errs[i]))
		})
	}
	wg.Wait()
	for i, w := range batch {
		switch err := errs[i]; {
		case err == nil:
			keep = append(keep, w)
		case errors.Is(err, platform.ErrUnsendable):
			d.unreserve(w)
			w.unsendable = err
			unsendable = append(unsendable, w)
		default:
			d.log.Warn("staging the send failed; nothing was sent, the work waits and is staged again",
				zap.String("account", w.intent.Account), zap.Stringer("delivery_key", w.intent.Key), zap.Error(err))
			d.delay(w, "staging_failed", d.cfg.GateDelay)
		}
	}
	return keep, unsendable
}

// resolveReply reads what w's adapter needs of its parent (platform.ReplyResolver) and prepares
// the request with it.
func (d *Dispatcher) resolveReply(ctx context.Context, w *work) error {
	r, err := w.adapter.(platform.ReplyResolver).ResolveReply(ctx, w.request)
	if err != nil {
		return err
	}
	w.request, w.resolve = r, false
	w.prepared, err = w.adapter.Prepare(r)
	return err
}
