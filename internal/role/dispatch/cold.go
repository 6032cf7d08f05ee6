package dispatch

import (
	"math/rand/v2"
	"time"

	"github.com/atmost/atmost/pkg/ledger"
)

// This file is the cold account's trial send (docs/design.md#the-bound-on-sends-to-a-platform-that-is-down).
// The ledger's health counts a platform's failures only once they are reported, and a send
// takes the time of a connection attempt to fail: without a trial, every intent of a burst for
// an account that went quiet reaches a platform that may have gone away since (up to the
// dispatcher's concurrency, 1,024 by default). An account this dispatcher has seen no success
// from within ColdAfter is cold: one of its intents at a time passes the gate, and its
// others wait, a little longer each time they come back, until one succeeds. After a failure
// the ledger's suspect slot takes over, for the whole pool.

// warm reports whether this dispatcher saw a success from account within ColdAfter. Called
// with rate held.
func (d *Dispatcher) warm(account string, now time.Time) bool {
	return now.Before(d.warmUntil[account])
}

// learn takes what a completed send's outcome says of its account's platform: a success makes
// it warm for ColdAfter, a failure that speaks of the platform (unavailable, a refused
// credential, an unknown outcome) makes it cold at once, so that the sends this dispatcher
// starts next wait for a trial. The dispatcher's own not-sent outcomes say nothing.
func (d *Dispatcher) learn(w *work) {
	d.rate.Lock()
	defer d.rate.Unlock()
	switch ledger.SignalOf(w.outcome) {
	case ledger.SignalOK:
		d.warmUntil[w.intent.Account] = time.Now().Add(d.cfg.ColdAfter)
	case ledger.SignalNeutral:
	default:
		delete(d.warmUntil, w.intent.Account)
	}
}

// endTrial frees w's account for its next trial, when w was one.
func (d *Dispatcher) endTrial(w *work) {
	if !w.trial {
		return
	}
	w.trial = false
	d.rate.Lock()
	defer d.rate.Unlock()
	delete(d.trials, w.intent.Account)
}

// coldWait is how long the work of a cold account waits while its trial send is on its way:
// about a send's round trip the first time, doubled at each delivery up to GateDelay, spread
// by up to a tenth, so a burst costs the trial's time and a platform that stalls its trial
// does not see the burst come back again and again.
func (d *Dispatcher) coldWait(w *work) time.Duration {
	delivered := uint64(1)
	if md, err := w.msg.Metadata(); err == nil && md.NumDelivered > 0 {
		delivered = md.NumDelivered
	}
	wait := min(coldFirstWait<<min(delivered-1, 16), d.cfg.GateDelay)
	return wait + rand.N(wait/10+time.Millisecond)
}

// coldFirstWait is how long a cold account's work first waits for the trial's outcome.
const coldFirstWait = 100 * time.Millisecond
