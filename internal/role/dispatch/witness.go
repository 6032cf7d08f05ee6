package dispatch

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/tracing"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// publishFor publishes the transitions of keys and waits for JetStream's acknowledgements.
func (d *Dispatcher) publishFor(ctx context.Context, keys []identity.DeliveryKey) error {
	return d.retry(ctx, func() error { return d.relay.PublishFor(ctx, keys) })
}

// retry calls publish, trying again while ctx allows: a publish window momentarily full or a
// leader election is worth a second try before the work is given up.
func (d *Dispatcher) retry(ctx context.Context, publish func() error) error {
	pause := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := publish()
		if err == nil || attempt == 3 || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause *= 4
	}
}

// witness publishes the batch's transitions (the authorizations among them) and waits for
// JetStream's acknowledgements. Without them nothing is sent: the attempt is completed as not
// sent, which is the truth. Each acknowledgement of an authorized event names the stream
// sequence of the message JetStream holds; the outcome carries it to the ledger.
func (d *Dispatcher) witness(ctx context.Context, batch []*work) []*work {
	if len(batch) == 0 {
		return nil
	}
	claims := make([]ledger.Claim, len(batch))
	var written ledger.Written
	earliest := batch[0].deadline
	for i, w := range batch {
		claims[i] = w.claim
		w.addOutbox(&written, w.outbox)
		if w.deadline.Before(earliest) {
			earliest = w.deadline
		}
	}
	d.startSteps(batch, tracing.SpanWitness)
	wctx, cancel := context.WithDeadline(ctx, earliest)
	defer cancel()
	var seqs map[identity.DeliveryKey]uint64
	err := d.retry(wctx, func() (err error) {
		seqs, err = d.relay.WitnessWritten(wctx, written, claims)
		return err
	})
	if err != nil {
		d.log.Warn("the authorizations were not acknowledged by JetStream; nothing is sent", zap.Int("intents", len(batch)), zap.Error(err))
		d.notSent(batch, "witness", err)
		return nil
	}
	keep := batch[:0]
	for _, w := range batch {
		seq, ok := seqs[w.claim.Key]
		if !ok {
			d.notSent([]*work{w}, "witness", errors.New("JetStream acknowledged no authorized event of this attempt"))
			continue
		}
		w.witnessSeq = seq
		endStep(w, "acknowledged", nil)
		keep = append(keep, w)
	}
	return keep
}
