package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// gate checks the cheap transient gates per account, opens each account's adapter and renders
// each wire request. While a gate refuses, no attempt is created: the work waits. Work whose
// request the adapter cannot render (platform.ErrUnsendable) is returned apart, for park.
func (d *Dispatcher) gate(ctx context.Context, batch []*work) (keep, unsendable []*work) {
	if len(batch) == 0 {
		return nil, nil
	}
	var accounts []string
	seen := map[string]bool{}
	for _, w := range batch {
		if !seen[w.intent.Account] {
			seen[w.intent.Account] = true
			accounts = append(accounts, w.intent.Account)
		}
	}
	// Pipelines pass the gate one at a time: the tokens read here are shared with the batches
	// admitted earlier whose Authorize has not taken them from the bucket yet.
	d.rate.Lock()
	defer d.rate.Unlock()
	lctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
	defer cancel()
	gates, err := d.ledger.Gates(lctx, accounts)
	if err != nil {
		d.log.Warn("ledger read failed; the batch will be redelivered", zap.Error(err))
		return d.delayAll(batch, "ledger_unavailable", time.Second), nil
	}
	probes := map[string]bool{}
	trials := map[string]bool{}
	now := time.Now()
	for _, w := range batch {
		g, ok := gates[w.intent.Account]
		if !ok {
			d.holding(w, "account_missing", nil)
			d.delay(w, "account_missing", d.cfg.GateDelay)
			continue
		}
		account := w.intent.Account
		if g.Health != ledger.Serving {
			delete(d.warmUntil, account) // warm again only after a success seen here
		}
		if refusal := g.Refusal(); refusal == ledger.ReasonHeld {
			// Acknowledged, not given back: a held account's backlog would otherwise fill the
			// consumer's MaxAckPending and stall every other account's work. The intent waits
			// pending in the ledger, nothing lost; the sweeper publishes its work again when
			// the account serves again or its probe is due (docs/design.md#held-work-leaves-the-queue).
			d.holding(w, fmt.Sprintf("%s (%s, %s)", refusal, g.Health, g.HealthCause), nil)
			d.finish(w, "gated_"+string(refusal))
			continue
		} else if refusal != "" {
			d.holding(w, string(refusal), nil)
			d.delay(w, "gated_"+string(refusal), d.cfg.GateDelay)
			continue
		}
		cold := !d.cfg.noTrials && !d.warm(account, now)
		if cold && (d.trials[account] || trials[account]) {
			// A cold account's trial send is on its way: the rest wait for its outcome.
			d.delay(w, "gated_cold", d.coldWait(w))
			continue
		}
		if g.Health != ledger.Serving {
			// A probe is due: one intent of the account goes on to Begin, which gives the slot
			// to one of the pool; the others wait for its outcome without a Begin each.
			if probes[w.intent.Account] {
				d.delay(w, "gated_"+string(ledger.ReasonHeld), d.heldWait())
				continue
			}
			probes[w.intent.Account] = true
		}
		if ok, wait := g.Admits(d.reserved[w.intent.Account]); !ok {
			// Only as many sends as the bucket holds tokens go on to Begin; the others wait
			// for theirs, so a backlog is released at the policy's rate.
			d.delay(w, "gated_"+string(ledger.ReasonRateLimited), wait)
			continue
		}
		w.credentialVersion = g.Account.CredentialVersion
		ad, err := d.adapters.Open(g.Account)
		if err != nil {
			// A configuration the operator must fix: the work waits for it, no attempt made.
			d.holding(w, adapters.CauseAdapterUnavailable, err)
			d.delay(w, "adapter_unavailable", d.cfg.GateDelay)
			continue
		}
		d.holding(w, "", nil)
		w.adapter = ad
		if w.request, err = adapters.ReplyOf(w.intent, w.parentObject); err != nil {
			err = fmt.Errorf("%w: %w", platform.ErrUnsendable, err)
		} else if _, resolves := ad.(platform.ReplyResolver); resolves && w.request.Reply != nil {
			w.resolve = true // read from the platform, outside this lock: stage prepares it
		} else {
			w.prepared, err = ad.Prepare(w.request)
		}
		if errors.Is(err, platform.ErrUnsendable) {
			// No configuration makes this request sendable: a human decides.
			w.unsendable = err
			unsendable = append(unsendable, w)
			continue
		}
		if err != nil {
			d.log.Error("cannot prepare the send; the work waits for the configuration to be fixed", zap.String("account", w.intent.Account), zap.Stringer("delivery_key", w.intent.Key), zap.Error(err))
			d.delay(w, "unpreparable", d.cfg.GateDelay)
			continue
		}
		// Last, so that nothing in this loop gives the token back while the lock is held.
		d.reserved[w.intent.Account]++
		w.reserved = true
		if cold {
			d.trials[account], trials[account], w.trial = true, true, true
		}
		keep = append(keep, w)
	}
	return keep, unsendable
}

// heldWait is how long work held at Begin or Authorize waits before it is looked at again: the
// probe or the suspect account's single attempt that holds the slot is on its way, its outcome
// within a send, so GateDelay, spread by up to a tenth more, so that a backlog does not come back
// as one burst. Back at the gate while the account holds, the work is acknowledged
// (docs/design.md#held-work-leaves-the-queue).
func (d *Dispatcher) heldWait() time.Duration {
	wait := d.cfg.GateDelay
	return wait + rand.N(wait/10+time.Millisecond)
}

// holding logs why w's account holds its work (cause: a gate's reason, account_missing or
// adapters.CauseAdapterUnavailable with the adapter's error; "" when the account is served),
// once per account and change: a held account's work comes back every GateDelay, its log line
// does not. atmost_account_waiting_intents (the sweeper) counts the intents that wait. Called
// by gate, with rate held.
func (d *Dispatcher) holding(w *work, cause string, err error) {
	account := w.intent.Account
	state := cause
	if err != nil {
		state += ": " + err.Error()
	}
	was, logged := d.held[account]
	if state == was || (state == "" && !logged) {
		return
	}
	log := d.log.With(zap.String("account", account), zap.Stringer("delivery_key", w.intent.Key))
	switch {
	case state == "":
		delete(d.held, account)
		log.Info("account served again: its waiting work goes on", zap.String("was", was))
		return
	case cause == "account_missing":
		log.Error("intents of an account that is not configured wait; no attempt is made")
	case err != nil:
		log.Error("cannot open the account's platform adapter: its work waits, no attempt made, until the configuration is fixed (atmost accounts show, atmost accounts update)",
			zap.Error(err))
	default:
		log.Info("a gate holds the account: its work waits, no attempt made", zap.String("reason", cause))
	}
	d.held[account] = state
}

// park parks the intents whose requests the platform cannot render (request_unsendable): no
// attempt was opened and nothing was sent. An intent that moved on meanwhile is left alone.
func (d *Dispatcher) park(ctx context.Context, batch []*work) {
	var parked []*work
	for _, w := range batch {
		lctx, cancel := context.WithTimeout(ctx, d.cfg.LedgerTimeout)
		err := d.ledger.ParkUnsendable(lctx, w.intent.Key, w.unsendable.Error())
		cancel()
		switch {
		case err == nil:
			d.log.Warn("request unsendable on its platform: parked for a human", zap.String("account", w.intent.Account),
				zap.Stringer("delivery_key", w.intent.Key), zap.Error(w.unsendable))
			parked = append(parked, w)
		case errors.Is(err, ledger.ErrInvalidTransition), errors.Is(err, ledger.ErrNotFound):
			d.finish(w, "not_pending")
		default:
			d.log.Warn("parking an unsendable request failed; the work comes back", zap.Stringer("delivery_key", w.intent.Key), zap.Error(err))
			d.delay(w, "ledger_unavailable", time.Second)
		}
	}
	if len(parked) == 0 {
		return
	}
	keys := make([]identity.DeliveryKey, len(parked))
	for i, w := range parked {
		keys[i] = w.intent.Key
	}
	if err := d.publishFor(ctx, keys); err != nil {
		d.log.Warn("publishing the parked intents failed; the outbox keeps them", zap.Error(err))
	}
	for _, w := range parked {
		d.finish(w, "parked_unsendable")
	}
}
