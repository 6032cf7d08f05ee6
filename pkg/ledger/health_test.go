package ledger_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// healthEnv is newEnv with health thresholds small enough to reach (the default's trip_failures,
// 3 unknowns), which newEnv lifts out of the way of the tests that are not about health.
func healthEnv(t *testing.T) *env { return healthEnvAt(t, pgx.Serializable) }

func healthEnvAt(t *testing.T, iso pgx.TxIsoLevel) *env {
	e := newEnvAt(t, iso)
	e.exec(`UPDATE policies SET trip_failures = 3, trip_unknowns = 3 WHERE scope = ''`)
	return e
}

// healthOf reads account's health.
func (e *env) healthOf(acct string) ledger.Health {
	e.t.Helper()
	hs, err := e.l.AccountHealth(e.ctx, acct)
	require.NoError(e.t, err)
	require.Len(e.t, hs, 1)
	return hs[0]
}

// holdHealth puts the account in holding with cause, a probe due after probeIn (negative: due now).
func (e *env) holdHealth(cause string, probeIn time.Duration) {
	e.t.Helper()
	e.exec(`INSERT INTO account_health (account_id, state, cause, next_probe_at) VALUES ($1, 'holding', $2, now() + $3 * INTERVAL '1 millisecond')
	        ON CONFLICT (account_id) DO UPDATE SET state = 'holding', cause = excluded.cause, next_probe_at = excluded.next_probe_at,
	        probe_token = NULL, probe_until = NULL`, account, cause, probeIn.Milliseconds())
}

func connectionFailed() ledger.Outcome {
	return ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed}
}

func refusedWith(status int) ledger.Outcome {
	return ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonPlatformRejected, Detail: map[string]any{"status": status}}
}

func (e *env) healthHistory() int {
	return e.count(`SELECT count(*) FROM control_history WHERE kind = 'health' AND scope = $1`, account)
}

// completeAuthorized authorizes a fresh intent and completes it with o.
func (e *env) completeAuthorized(text string, o ledger.Outcome) ledger.Claim {
	e.t.Helper()
	c := e.authorized(text)
	_, err := e.l.Complete(e.ctx, c, o)
	require.NoError(e.t, err)
	return c
}

func TestHealthTripsOnConsecutiveUnavailableFailures(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	e.completeAuthorized("down 1", connectionFailed())
	e.completeAuthorized("down 2", refusedWith(503))
	require.Equal(t, ledger.Serving, e.healthOf(account).State, "two failures are below the threshold of three")
	require.Zero(t, e.healthHistory(), "counting is not a change of state")
	e.completeAuthorized("down 3", refusedWith(429))
	h := e.healthOf(account)
	require.Equal(t, ledger.Holding, h.State)
	require.Equal(t, ledger.CausePlatformUnavailable, h.Cause)
	require.False(t, h.NextProbe.IsZero(), "a platform that is down is probed")
	require.Equal(t, 1, e.healthHistory())
}

func TestHealthCountsOnlyConsecutiveFailures(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	e.completeAuthorized("down 1", connectionFailed())
	e.completeAuthorized("down 2", connectionFailed())
	// A refusal for the content proves the platform answers: the count starts again.
	e.completeAuthorized("bad request", refusedWith(400))
	e.completeAuthorized("down 3", connectionFailed())
	e.completeAuthorized("down 4", connectionFailed())
	require.Equal(t, ledger.Serving, e.healthOf(account).State)
	e.completeAuthorized("down 5", connectionFailed())
	require.Equal(t, ledger.Holding, e.healthOf(account).State)
}

func TestHealthThresholdIsThePolicys(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	e.setPolicy("trip_failures", 1)
	e.completeAuthorized("down", connectionFailed())
	require.Equal(t, ledger.Holding, e.healthOf(account).State)
}

func TestBeginOpensNoAttemptForAHoldingAccount(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	key := e.submit("waits")
	e.holdHealth(ledger.CausePlatformUnavailable, time.Hour)
	_, err := e.l.Begin(e.ctx, key, requestHash("waits"), lease)
	requireRefused(t, err, ledger.ErrAccountHolding)
	in := e.intent(key)
	require.Equal(t, ledger.Pending, in.State)
	require.Equal(t, ledger.ReasonSubmitted, in.Reason)
	require.Zero(t, e.attempts(key), "no attempt while the account holds")
	// The gate the dispatcher reads before Begin says so too.
	g, err := e.l.Gates(e.ctx, []string{account})
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonHeld, g[account].Refusal())
}

func TestAuthorizeHoldsAClaimOfAHoldingAccount(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	c := e.claim("claimed before the trip")
	e.holdHealth(ledger.CausePlatformUnavailable, time.Hour)
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Pending, a.State)
	require.Equal(t, ledger.ReasonHeld, a.Reason)
	in := e.intent(c.Key)
	require.Equal(t, ledger.Pending, in.State)
	require.Nil(t, in.LeaseExpiresAt, "the held claim ended")
	require.Zero(t, in.AttemptsAuthorized, "a held claim spends no attempt")
	require.Zero(t, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND to_state = 'authorized'`, c.Key.Bytes()))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM attempt_evidence WHERE attempt_token = $1 AND outcome = 'abandoned' AND reason = 'held'`, c.Token.Bytes()))

	// Resumed, the intent is claimed and authorized again, as from the start.
	_, err = e.l.ResumeAccount(e.ctx, account, ledger.Actor{Name: "alice", Reason: "the platform is back"})
	require.NoError(t, err)
	c2, err := e.l.Begin(e.ctx, c.Key, requestHash("claimed before the trip"), lease)
	require.NoError(t, err)
	a, err = e.l.Authorize(e.ctx, c2, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Authorized, a.State)
}

// The probe's slot: of any number of Begins racing on a holding account whose probe is due,
// exactly one intent is claimed, by one dispatcher; the others open no attempt.
func TestProbeSlotIsTakenOnce(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			e := healthEnvAt(t, iso)
			const n = 8
			for round := range 3 {
				texts := make([]string, n)
				for i := range n {
					texts[i] = fmt.Sprintf("round %d intent %d", round, i)
				}
				keys := make([]ledger.BeginRequest, n)
				for i, text := range texts {
					keys[i] = ledger.BeginRequest{Key: e.submit(text), RequestHash: requestHash(text)}
				}
				e.holdHealth(ledger.CausePlatformUnavailable, -time.Second)
				var wg sync.WaitGroup
				var mu sync.Mutex
				claims, holding := 0, 0
				for i := range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						l := e.ledgerWith(ledger.Config{Actor: fmt.Sprintf("dispatcher-%d", i)})
						res, err := l.BeginMany(e.ctx, keys[i:i+1], lease)
						require.NoError(t, err)
						mu.Lock()
						defer mu.Unlock()
						switch {
						case res[0].Err == nil:
							claims++
						default:
							require.ErrorIs(t, res[0].Err, ledger.ErrAccountHolding)
							holding++
						}
					}()
				}
				wg.Wait()
				require.Equal(t, 1, claims, "one probe")
				require.Equal(t, n-1, holding)
				require.Equal(t, 1, e.count(`SELECT count(*) FROM attempts a JOIN account_health h ON h.probe_token = a.attempt_token WHERE h.state = 'probing'`))
				e.exec(`UPDATE intents SET state = 'parked', reason = 'operator_parked', lease_expires_at = NULL WHERE state = 'pending'`)
			}
		})
	}
}

func TestProbeSuccessServesAgain(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	key := e.submit("probe")
	waiting := e.submit("waits for the probe")
	e.holdHealth(ledger.CausePlatformUnavailable, -time.Second)
	res, err := e.l.BeginMany(e.ctx, []ledger.BeginRequest{
		{Key: key, RequestHash: requestHash("probe")}, {Key: waiting, RequestHash: requestHash("waits for the probe")},
	}, lease)
	require.NoError(t, err)
	probe := res[0]
	if probe.Err != nil {
		probe = res[1]
		requireRefused(t, res[0].Err, ledger.ErrAccountHolding)
	} else {
		requireRefused(t, res[1].Err, ledger.ErrAccountHolding)
	}
	require.NoError(t, probe.Err)
	require.Equal(t, ledger.Probing, e.healthOf(account).State)
	a, err := e.l.Authorize(e.ctx, probe.Claim, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Authorized, a.State)
	in := e.intent(probe.Claim.Key)
	require.Equal(t, 1, e.count(`SELECT attempts_uncounted FROM intents WHERE delivery_key = $1`, probe.Claim.Key.Bytes()), "the probe is not counted against the cap")
	require.Equal(t, 1, in.AttemptsAuthorized)
	_, err = e.l.Complete(e.ctx, probe.Claim, ledger.Outcome{Result: ledger.Sent, ObjectID: "obj", Confirmed: true})
	require.NoError(t, err)
	require.Equal(t, ledger.Serving, e.healthOf(account).State)
	require.Equal(t, 2, e.healthHistory(), "probing, then served (the hold was set by the test)")
}

func TestProbeFailureHoldsLonger(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	e.setPolicy("probe_max_ms", 3600_000)
	var waits []time.Duration
	for i := range 3 {
		text := fmt.Sprintf("probe %d", i)
		key := e.submit(text)
		e.exec(`UPDATE account_health SET next_probe_at = now() - INTERVAL '1 second' WHERE account_id = $1`, account)
		if i == 0 {
			e.holdHealth(ledger.CausePlatformUnavailable, -time.Second)
		}
		c, err := e.l.Begin(e.ctx, key, requestHash(text), lease)
		require.NoError(t, err)
		_, err = e.l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		_, err = e.l.Complete(e.ctx, c, connectionFailed())
		require.NoError(t, err)
		h := e.healthOf(account)
		require.Equal(t, ledger.Holding, h.State)
		require.Equal(t, i+1, h.Trips)
		waits = append(waits, time.Until(h.NextProbe))
	}
	require.Greater(t, waits[1], waits[0])
	require.Greater(t, waits[2], waits[1])
}

func TestAuthenticationFailuresHoldUntilResumed(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	for i := range 3 {
		e.completeAuthorized(fmt.Sprintf("401 %d", i), refusedWith(401))
	}
	h := e.healthOf(account)
	require.Equal(t, ledger.Holding, h.State)
	require.Equal(t, ledger.CauseAuthFailed, h.Cause)
	require.True(t, h.NextProbe.IsZero(), "waiting will not fix a credential: no probe")
	key := e.submit("after the 401s")
	_, err := e.l.Begin(e.ctx, key, requestHash("after the 401s"), lease)
	requireRefused(t, err, ledger.ErrAccountHolding)

	ch, err := e.l.ResumeAccount(e.ctx, account, ledger.Actor{Name: "alice", Reason: "rotated the credential"})
	require.NoError(t, err)
	require.Equal(t, ledger.Holding, ch.From)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM control_history WHERE kind = 'health' AND actor = 'alice' AND reason = 'rotated the credential'`))
	_, err = e.l.ResumeAccount(e.ctx, account, ledger.Actor{Name: "alice", Reason: "again"})
	require.ErrorIs(t, err, ledger.ErrNotHolding)
	_, err = e.l.ResumeAccount(e.ctx, "nobody", ledger.Actor{Name: "alice", Reason: "who"})
	require.ErrorIs(t, err, ledger.ErrUnknownAccount)
	_, err = e.l.Begin(e.ctx, key, requestHash("after the 401s"), lease)
	require.NoError(t, err)
}

func TestUnknownOutcomesHoldUntilReconciled(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	e.setPolicy("trip_unknowns", 2)
	var keys []ledger.Claim
	for i := range 3 {
		keys = append(keys, e.completeAuthorized(fmt.Sprintf("unknown %d", i), ledger.Outcome{Result: ledger.Unknown}))
		if i < 2 {
			require.Equal(t, ledger.Serving, e.healthOf(account).State, "%d unknowns are not more than 2", i+1)
		}
	}
	h := e.healthOf(account)
	require.Equal(t, ledger.Holding, h.State)
	require.Equal(t, ledger.CauseUnknownOutcomes, h.Cause)
	require.True(t, h.NextProbe.IsZero(), "an unknown-outcome hold is not probed")
	healed, err := e.l.HealReconciled(e.ctx)
	require.NoError(t, err)
	require.Empty(t, healed, "three unknowns still stand")
	// One is reconciled (here: parked by an operator): two stand, not more than the threshold.
	e.exec(`UPDATE intents SET state = 'parked', reason = 'operator_parked' WHERE delivery_key = $1`, keys[0].Key.Bytes())
	healed, err = e.l.HealReconciled(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{account}, healed)
	require.Equal(t, ledger.Serving, e.healthOf(account).State)
}

func TestAttemptCapCountsOnlyAttemptsWhileServing(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	e.setPolicy("attempt_cap", 1)
	key := e.submit("probed once")
	// One attempt authorized, as a probe: not counted.
	e.exec(`UPDATE intents SET attempts_authorized = 1, attempts_uncounted = 1 WHERE delivery_key = $1`, key.Bytes())
	c, err := e.l.Begin(e.ctx, key, requestHash("probed once"), lease)
	require.NoError(t, err)
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Authorized, a.State)
	_, err = e.l.Complete(e.ctx, c, connectionFailed())
	require.NoError(t, err)
	// Now one counted attempt: the cap is reached.
	require.ErrorIs(t, e.l.Retry(e.ctx, key), ledger.ErrAttemptsExhausted)
}

// Reports racing from many dispatchers trip the account once: one control_history row, the
// health row changed only at the version each read.
func TestConcurrentReportsTripOnce(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			e := healthEnvAt(t, iso)
			const n = 12
			claims := make([]ledger.Claim, n)
			for i := range n {
				claims[i] = e.authorized(fmt.Sprintf("racing %d", i))
			}
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					l := e.ledgerWith(ledger.Config{Actor: fmt.Sprintf("dispatcher-%d", i)})
					_, err := l.Complete(e.ctx, claims[i], connectionFailed())
					require.NoError(t, err)
				}()
			}
			wg.Wait()
			require.Equal(t, ledger.Holding, e.healthOf(account).State)
			require.Equal(t, 1, e.healthHistory(), "one trip")
		})
	}
}

// A policy governs every failed reason but those retried always: it may list connection_failed
// (and leave it out), and is refused account_disabled, which it cannot govern.
func TestAPolicyGovernsEveryFailedReasonItMayName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{RetryableReasons: []ledger.Reason{ledger.ReasonAccountDisabled}}}, ledger.Actor{Name: "alice", Reason: "try"})
	require.ErrorContains(t, err, "retried always")
	require.Zero(t, e.count(`SELECT count(*) FROM control_history WHERE kind = 'policy' AND scope = $1`, account))
	_, err = e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{RetryableReasons: []ledger.Reason{}}}, ledger.Actor{Name: "alice", Reason: "retry nothing"})
	require.NoError(t, err)
	require.Contains(t, ledger.GovernedReasons(), ledger.ReasonConnectionFailed)
	require.NotContains(t, ledger.GovernedReasons(), ledger.ReasonAccountDisabled)
}

// A send refused for the account's credential (an auth status) fails as credential_refused,
// which is retried whatever the policy lists: its intent waits with the account's others for
// the rotated credential, and no operator retries it. A refusal of the content stays
// platform_rejected, the policy's to retry.
func TestARefusedCredentialIsRetriedWhateverThePolicy(t *testing.T) {
	t.Parallel()
	e := healthEnv(t)
	e.setPolicy("backoff_base_ms", 0)
	e.exec(`UPDATE policies SET retryable_reasons = ARRAY[]::TEXT[] WHERE scope = ''`)
	refused := e.completeAuthorized("refused credential", refusedWith(401))
	content := e.completeAuthorized("refused content", refusedWith(400))
	require.Equal(t, ledger.ReasonCredentialRefused, e.intent(refused.Key).Reason)
	require.Equal(t, ledger.ReasonPlatformRejected, e.intent(content.Key).Reason)
	pass, err := e.l.RetryDue(e.ctx, 100)
	require.NoError(t, err)
	require.Equal(t, []identity.DeliveryKey{refused.Key}, pass.Changed, "retried always; the content's refusal is the policy's")
	require.Equal(t, ledger.Pending, e.intent(refused.Key).State)
}
