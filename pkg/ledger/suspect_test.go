package ledger_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/ledger"
)

// A suspect account (serving, a definitive failure counted since its last success) lets one
// attempt in flight at a time: of a batch, Begin claims one intent and holds the others, and
// the next is claimed only once that attempt reported. So after the first failure, at most
// trip_failures - 1 more sends go before the trip.
func TestASuspectAccountLetsOneAttemptInFlight(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	e.completeAuthorized("first failure", connectionFailed())
	require.Equal(t, 1, e.healthOf(account).Failures)

	const n = 4
	reqs := make([]ledger.BeginRequest, n)
	for i := range n {
		text := fmt.Sprintf("due while suspect %d", i)
		reqs[i] = ledger.BeginRequest{Key: e.submit(text), RequestHash: requestHash(text)}
	}
	res, err := e.l.BeginMany(e.ctx, reqs, lease)
	require.NoError(t, err)
	var slot ledger.Claim
	claims := 0
	for _, r := range res {
		if r.Err == nil {
			claims++
			slot = r.Claim
			continue
		}
		require.ErrorIs(t, r.Err, ledger.ErrAccountHolding)
	}
	require.Equal(t, 1, claims, "one attempt in flight while suspect")
	require.Equal(t, ledger.Serving, e.healthOf(account).State)
	require.Zero(t, e.healthHistory(), "taking the slot is no change of state")

	// Another Begin (another dispatcher) while the slot is taken: holding.
	res, err = e.l.BeginMany(e.ctx, reqs, lease)
	require.NoError(t, err)
	for i, r := range res {
		if reqs[i].Key != slot.Key {
			require.ErrorIs(t, r.Err, ledger.ErrAccountHolding)
		}
	}
	a, err := e.l.Authorize(e.ctx, slot, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Authorized, a.State, "the slot's holder is authorized")
	require.Equal(t, 1, e.count(`SELECT attempts_uncounted FROM intents WHERE delivery_key = $1`, slot.Key.Bytes()),
		"the suspect slot's attempt, sent to a platform seen failing, is not counted against the cap")
	res, err = e.l.BeginMany(e.ctx, reqs, lease)
	require.NoError(t, err)
	for _, r := range res {
		require.Error(t, r.Err, "the slot is taken while its attempt is in flight")
	}

	// Its report frees the slot: the next intent is claimed.
	_, err = e.l.Complete(e.ctx, slot, connectionFailed())
	require.NoError(t, err)
	require.Equal(t, 2, e.healthOf(account).Failures)
	res, err = e.l.BeginMany(e.ctx, reqs, lease)
	require.NoError(t, err)
	claims = 0
	for _, r := range res {
		if r.Err == nil {
			claims++
		}
	}
	require.Equal(t, 1, claims)
}

// A claim opened while the account served is held at Authorize once a failure is counted: only
// the slot's holder goes.
func TestAuthorizeHoldsAClaimOpenedBeforeTheFirstFailure(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	early := e.claim("claimed while serving")
	e.completeAuthorized("first failure", connectionFailed())
	a, err := e.l.Authorize(e.ctx, early, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Pending, a.State)
	require.Equal(t, ledger.ReasonHeld, a.Reason)
	require.Zero(t, e.intent(early.Key).AttemptsAuthorized, "a held claim spends no attempt")

	// A success frees the account: no failures counted, every claim goes.
	ok := e.authorized("the platform answers")
	_, err = e.l.Complete(e.ctx, ok, ledger.Outcome{Result: ledger.Sent, ObjectID: "o-1", Confirmed: true})
	require.NoError(t, err)
	require.Zero(t, e.healthOf(account).Failures)
	c1, c2 := e.claim("after the success 1"), e.claim("after the success 2")
	for _, c := range []ledger.Claim{c1, c2} {
		a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		require.Equal(t, ledger.Authorized, a.State)
	}
}

// At READ COMMITTED, an Authorize that runs while a report counting the first failure is not
// yet committed waits for it (the health row locked FOR SHARE) and holds the claim: a claim
// opened before the first failure is never authorized after it.
func TestAuthorizeWaitsForAFailureBeingCounted(t *testing.T) {
	t.Parallel()
	e := healthEnvAt(t, pgx.ReadCommitted)
	c := e.claim("claimed while serving")
	e.exec(`INSERT INTO account_health (account_id) VALUES ($1)`, account)
	tx, err := e.pool.Begin(e.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(e.ctx) }()
	_, err = tx.Exec(e.ctx, `UPDATE account_health SET failures = 1, version = version + 1 WHERE account_id = $1`, account)
	require.NoError(t, err)

	type answer struct {
		a   ledger.Authorization
		err error
	}
	done := make(chan answer, 1)
	go func() {
		a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
		done <- answer{a, err}
	}()
	var got answer
	for waiting := false; !waiting; {
		select {
		case got = <-done:
			waiting = true // answered without waiting: the failure not seen
		case <-time.After(20 * time.Millisecond):
			waiting = e.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0
		}
	}
	require.NoError(t, tx.Commit(e.ctx))
	if got.a.State == "" && got.err == nil {
		got = <-done
	}
	require.NoError(t, got.err)
	require.Equal(t, ledger.Pending, got.a.State, "the claim is held, not authorized")
	require.Equal(t, ledger.ReasonHeld, got.a.Reason)
}

// The dispatcher's own not-sent outcomes (a send it refused to start, an Authorize whose answer
// was lost) say nothing of the platform: any number of them never trips an account nor counts.
func TestNeutralOutcomesNeverTripAnAccount(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	neutral := ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed, Signal: ledger.SignalNeutral,
		Detail: map[string]any{"step": "deadline"}}
	for i := range 6 {
		c := e.completeAuthorized(fmt.Sprintf("refused to start %d", i), neutral)
		require.Equal(t, ledger.Failed, e.state(c.Key), "still a definitive not-sent, retried")
	}
	h := e.healthOf(account)
	require.Equal(t, ledger.Serving, h.State)
	require.Zero(t, h.Failures)
	require.Zero(t, e.healthHistory())

	// Nor does one in the middle break the count of real failures.
	e.completeAuthorized("down 1", connectionFailed())
	e.completeAuthorized("refused to start", neutral)
	require.Equal(t, 1, e.healthOf(account).Failures)
	// The neutral report of the suspect account's single attempt freed its slot.
	e.claim("the next one goes")
}

// An adapter's declared signal decides over the one derived from the outcome: a 500 the adapter
// proves unsent counts as unavailable, a 503 it declares ok does not.
func TestTheAdaptersSignalDecides(t *testing.T) {
	t.Parallel()
	require.Equal(t, ledger.SignalUnavailable, ledger.SignalOf(ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonPlatformRejected,
		Detail: map[string]any{"status": 500}, Signal: ledger.SignalUnavailable}))
	require.Equal(t, ledger.SignalOK, ledger.SignalOf(ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonPlatformRejected,
		Detail: map[string]any{"status": 503}, Signal: ledger.SignalOK}))
	e := healthEnv(t)
	for i := range 3 {
		e.completeAuthorized(fmt.Sprintf("unsent 500 %d", i), ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonPlatformRejected,
			Detail: map[string]any{"status": 500}, Signal: ledger.SignalUnavailable})
	}
	require.Equal(t, ledger.Holding, e.healthOf(account).State, "three declared unavailable trip it")
}

// The suspect account's slot: of any number of Begins racing on it, exactly one intent is
// claimed, by one dispatcher; the others open no attempt.
func TestSuspectSlotIsTakenOnce(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			e := healthEnvAt(t, iso)
			e.completeAuthorized("first failure", connectionFailed())
			const n = 8
			ledgers := make([]*ledger.Ledger, n)
			for i := range n {
				ledgers[i] = e.ledgerWith(ledger.Config{Actor: fmt.Sprintf("dispatcher-%d", i)})
			}
			for round := range 10 {
				reqs := make([]ledger.BeginRequest, n)
				for i := range n {
					text := fmt.Sprintf("round %d intent %d", round, i)
					reqs[i] = ledger.BeginRequest{Key: e.submit(text), RequestHash: requestHash(text)}
				}
				e.exec(`UPDATE account_health SET probe_token = NULL, probe_until = NULL WHERE account_id = $1`, account)
				var wg sync.WaitGroup
				var mu sync.Mutex
				claims := 0
				start := make(chan struct{})
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						res, err := ledgers[i].BeginMany(e.ctx, reqs[i:i+1], lease)
						require.NoError(t, err)
						mu.Lock()
						defer mu.Unlock()
						if res[0].Err == nil {
							claims++
						} else {
							require.ErrorIs(t, res[0].Err, ledger.ErrAccountHolding)
						}
					}()
				}
				close(start)
				wg.Wait()
				require.Equal(t, 1, claims, "one attempt in flight")
				e.exec(`UPDATE intents SET state = 'parked', reason = 'operator_parked', lease_expires_at = NULL WHERE state = 'pending'`)
			}
		})
	}
}

// The complaint, for one intent alone: due while its platform is down, it takes every
// attempt until the account trips (trip_failures 3, the default attempt cap 3). Only the first
// counts: the others went through the suspect slot to a platform already seen failing. So the
// trip leaves it failed and retryable, waiting for the platform, not parked attempts_exhausted.
func TestALoneIntentDueThroughAnOutageIsNotParkedAtTheTrip(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	e.setPolicy("attempt_cap", 3)
	e.setPolicy("backoff_base_ms", 0)
	key := e.submit("alone through an outage")
	for i := range 3 {
		if i > 0 {
			pass, err := e.l.RetryDue(e.ctx, 100)
			require.NoError(t, err)
			require.Equal(t, 1, pass.Retried, "attempt %d: retried, not exhausted", i+1)
		}
		c, err := e.l.Begin(e.ctx, key, requestHash("alone through an outage"), lease)
		require.NoError(t, err)
		a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		require.Equal(t, ledger.Authorized, a.State)
		_, err = e.l.Complete(e.ctx, c, connectionFailed())
		require.NoError(t, err)
	}
	require.Equal(t, ledger.Holding, e.healthOf(account).State)
	require.Equal(t, 2, e.count(`SELECT attempts_uncounted FROM intents WHERE delivery_key = $1`, key.Bytes()), "the suspect slot's two attempts")
	pass, err := e.l.RetryDue(e.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, 1, pass.Retried)
	require.Zero(t, pass.Exhausted)
	in := e.intent(key)
	require.Equal(t, ledger.Pending, in.State, "it waits for the platform")
	_, err = e.l.Begin(e.ctx, key, requestHash("alone through an outage"), lease)
	require.ErrorIs(t, err, ledger.ErrAccountHolding, "and spends nothing while the account holds")
}

// A suspect account's slot whose claim a gate refuses at Authorize (a kill switch, here) is
// freed by that refusal: nothing will be sent or reported, so the account's next intent takes
// the slot at once, not when the refused claim's lease would have run out.
func TestASuspectSlotRefusedAtAuthorizeIsFreedAtOnce(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	e.completeAuthorized("first failure", connectionFailed())
	slot := e.claim("takes the slot")
	e.exec(`INSERT INTO switches (scope, engaged, actor) VALUES ('', true, 'test')`)
	a, err := e.l.Authorize(e.ctx, slot, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonKillSwitch, a.Reason)
	e.exec(`DELETE FROM switches`)
	next := e.submit("the next intent")
	_, err = e.l.Begin(e.ctx, next, requestHash("the next intent"), lease)
	require.NoError(t, err, "the refused claim freed the slot")
}
