package dispatch

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// replies reads the parents of the batch's replies (envelope reply_to). A reply whose parent is
// published goes on, to the object its parent created. One whose parent ended without a
// publication is parked dependency_unmet, no attempt opened. Any other waits: its work item is
// acknowledged, nothing is begun, and the relay publishes its work again when its parent's end
// is relayed (ledger.WaitingReplies), so a waiting reply costs nothing until then.
func (d *Dispatcher) replies(ctx context.Context, batch []*work) []*work {
	var parents []identity.DeliveryKey
	for _, w := range batch {
		if !w.intent.ReplyTo.IsZero() {
			parents = append(parents, w.intent.ReplyTo)
		}
	}
	if len(parents) == 0 {
		return batch
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
	read, err := d.ledger.Parents(rctx, parents)
	cancel()
	if err != nil {
		d.log.Warn("ledger read failed; the batch will be redelivered", zap.Error(err))
		return d.delayAll(batch, "ledger_unavailable", time.Second)
	}
	var unmet []identity.DeliveryKey
	for _, w := range batch {
		if p, ok := read[w.intent.ReplyTo]; ok && p.Unmet() && w.intent.LeaseExpiresAt == nil {
			unmet = append(unmet, w.intent.Key)
		}
	}
	parked := map[identity.DeliveryKey]bool{}
	if len(unmet) > 0 {
		pctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
		parked, err = d.ledger.ParkDependencyUnmet(pctx, unmet)
		cancel()
		if err != nil {
			d.log.Warn("parking replies whose parent ended failed; the batch will be redelivered", zap.Error(err))
			return d.delayAll(batch, "ledger_unavailable", time.Second)
		}
		if len(parked) > 0 {
			keys := make([]identity.DeliveryKey, 0, len(parked))
			for k := range parked {
				keys = append(keys, k)
			}
			d.log.Info("replies whose parent ended without a publication parked before any attempt", zap.Int("intents", len(parked)))
			if err := d.publishFor(ctx, keys); err != nil {
				d.log.Warn("publishing the parked intents failed; the outbox keeps them", zap.Error(err))
			}
		}
	}
	keep := batch[:0]
	for _, w := range batch {
		p := read[w.intent.ReplyTo]
		switch {
		case w.intent.ReplyTo.IsZero():
			keep = append(keep, w)
		case parked[w.intent.Key]:
			d.finish(w, "parked_"+string(ledger.ReasonDependencyUnmet))
		case p.State == ledger.Published:
			w.parentObject = p.ObjectID
			keep = append(keep, w)
		default:
			// Not published yet (or failed for a reason its policy retries, or not stored
			// yet): the parent's end brings this reply's work back.
			d.finish(w, string(ledger.ReasonAwaitingParent))
		}
	}
	return keep
}
