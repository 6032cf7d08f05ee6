package ledger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// Every gate of the before-byte checkpoint is re-checked at Authorize, after Begin: each test
// flips one condition between the two and proves the send is stopped with nothing authorized.
func TestAuthorizeRechecksEveryGate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		flip   func(e *env, c ledger.Claim)
		state  ledger.State
		reason ledger.Reason
	}{
		{"global kill switch", func(e *env, _ ledger.Claim) {
			e.exec(`INSERT INTO switches (scope, engaged, actor) VALUES ('', true, 'op')`)
		}, ledger.Failed, ledger.ReasonKillSwitch},
		{"account kill switch", func(e *env, _ ledger.Claim) {
			e.exec(`INSERT INTO switches (scope, engaged, actor) VALUES ($1, true, 'op')`, account)
		}, ledger.Failed, ledger.ReasonKillSwitch},
		{"account disabled", func(e *env, _ ledger.Claim) {
			e.exec(`UPDATE accounts SET disabled = true WHERE account_id = $1`, account)
		}, ledger.Failed, ledger.ReasonAccountDisabled},
		{"credential revoked", func(e *env, _ ledger.Claim) {
			e.exec(`UPDATE accounts SET revoked = true WHERE account_id = $1`, account)
		}, ledger.Failed, ledger.ReasonCredentialRevoked},
		{"credential rotated", func(e *env, _ ledger.Claim) {
			e.exec(`UPDATE accounts SET credential_version = credential_version + 1 WHERE account_id = $1`, account)
		}, ledger.Failed, ledger.ReasonCredentialRotating},
		{"platform contract changed", func(e *env, _ ledger.Claim) {
			e.exec(`UPDATE accounts SET contract_version = 'sim/2' WHERE account_id = $1`, account)
		}, ledger.Parked, ledger.ReasonContractChanged},
		{"attempt cap lowered", func(e *env, c ledger.Claim) {
			e.exec(`UPDATE intents SET attempts_authorized = 3 WHERE delivery_key = $1`, c.Key.Bytes())
		}, ledger.Parked, ledger.ReasonAttemptsExhausted},
		{"rate limit spent", func(e *env, _ ledger.Claim) {
			e.setPolicy("rate_per_minute", 60)
			e.exec(`INSERT INTO rate_buckets (account_id, tokens, rate_per_minute, rate_burst) VALUES ($1, 0, 60, 10)`, account)
		}, ledger.Failed, ledger.ReasonRateLimited},
		{"duplicate text taken", func(e *env, c ledger.Claim) {
			e.exec(`INSERT INTO text_claims (account_id, text_hash, delivery_key) SELECT account_id, text_hash, '\x00'::BYTEA FROM intents WHERE delivery_key = $1`, c.Key.Bytes())
		}, ledger.Parked, ledger.ReasonDuplicateText},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c := e.claim("gate " + tc.name)
			tc.flip(e, c)
			before := e.intent(c.Key).AttemptsAuthorized
			a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
			require.NoError(t, err)
			require.Equal(t, tc.state, a.State)
			require.Equal(t, tc.reason, a.Reason)
			in := e.intent(c.Key)
			require.Equal(t, tc.state, in.State)
			require.Nil(t, in.LeaseExpiresAt, "a refused attempt holds no lease")
			require.Equal(t, before, in.AttemptsAuthorized, "a refused attempt does not count against the cap")
			require.Zero(t, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND to_state = 'authorized'`, c.Key.Bytes()))
		})
	}
}

func TestAuthorizeRefusesASupersededSource(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.claimWithSource("about the article", "https://example.org/a", "v1 body")
	// A newer version of the source became the stored head after Begin.
	e.exec(`UPDATE source_heads SET head_version = $1`, make([]byte, 32))
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.Parked, a.State)
	require.Equal(t, ledger.ReasonSupersededSource, a.Reason)
}

func TestAuthorizeAcceptsTheStoredHead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.claimWithSource("about the article", "https://example.org/a", "v1 body")
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "reason %s", a.Reason)
}

func TestAuthorizeTakesOneRateTokenPerAuthorization(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("rate_burst", 2)
	e.setPolicy("rate_per_minute", 1)
	for i, want := range []ledger.State{ledger.Authorized, ledger.Authorized, ledger.Failed} {
		c := e.claim("rate " + string(rune('a'+i)))
		a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		require.Equal(t, want, a.State, "authorization %d", i+1)
	}
	e.setPolicy("rate_per_minute", 0)
	c := e.claim("rate unlimited")
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "0 a minute means unlimited")
}

// The duplicate-text window, exactly at its edge: a text claimed at T is refused to another
// intent of the same account until T + window, and free again AT T + window.
func TestDuplicateTextAtTheWindowEdge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.setPolicy("text_window_seconds", 3600)
	first := e.authorized("the same words")
	var claimedAt time.Time
	require.NoError(t, e.pool.QueryRow(e.ctx, `SELECT last_at FROM text_claims`).Scan(&claimedAt))
	window := time.Hour

	// Other intents with the same text: a different occurrence makes a different key.
	at := func(offset time.Duration) ledger.Authorization {
		t.Helper()
		env := envelopeWithOccurrence(t, account, "the same words", offset.String())
		res, err := e.l.Submit(e.ctx, []identity.Envelope{env})
		require.NoError(t, err)
		c, err := e.l.Begin(e.ctx, res[0].Key, requestHash(offset.String()), lease)
		require.NoError(t, err)
		now := claimedAt.Add(offset)
		ledger.SetClock(e.l, func() *time.Time { return &now })
		defer ledger.SetClock(e.l, nil)
		e.exec(`UPDATE intents SET lease_expires_at = $2 WHERE delivery_key = $1`, res[0].Key.Bytes(), now.Add(time.Minute))
		a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
		require.NoError(t, err)
		return a
	}
	inside := at(window - time.Microsecond)
	require.Equal(t, ledger.Parked, inside.State)
	require.Equal(t, ledger.ReasonDuplicateText, inside.Reason)
	edge := at(window)
	require.True(t, edge.Authorized(), "at exactly the edge the text is free again (reason %s)", edge.Reason)
	_ = first

	// Another account's identical text is never a duplicate.
	e.exec(`INSERT INTO accounts (account_id, platform) VALUES ('acct-2', 'sim')`)
	res, err := e.l.Submit(e.ctx, []identity.Envelope{envelope(t, "acct-2", "the same words")})
	require.NoError(t, err)
	c, err := e.l.Begin(e.ctx, res[0].Key, requestHash("x"), lease)
	require.NoError(t, err)
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.True(t, a.Authorized(), "the window is per account")
}

// Only a pending intent nobody holds is parked as unsendable: a claim or an authorization is a
// worker's, whose attempt decides first.
func TestParkUnsendableOnlyFromPendingWithoutAClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	free := e.submit("an action the platform does not know")
	claimed := e.claim("claimed by a worker")
	authorized := e.authorized("authorized")

	require.NoError(t, e.l.ParkUnsendable(e.ctx, free, "no such action"))
	in := e.intent(free)
	require.Equal(t, ledger.Parked, in.State)
	require.Equal(t, ledger.ReasonRequestUnsendable, in.Reason)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND reason = 'request_unsendable' AND detail->>'why' = 'no such action'`, free.Bytes()))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1 AND seq = $2`, free.Bytes(), in.Seq))

	requireRefused(t, e.l.ParkUnsendable(e.ctx, claimed.Key, "x"), ledger.ErrInvalidTransition)
	require.Equal(t, ledger.Pending, e.state(claimed.Key))
	requireRefused(t, e.l.ParkUnsendable(e.ctx, authorized.Key, "x"), ledger.ErrInvalidTransition)
	require.Equal(t, ledger.Authorized, e.state(authorized.Key))
	requireRefused(t, e.l.ParkUnsendable(e.ctx, free, "again"), ledger.ErrInvalidTransition)
	requireRefused(t, e.l.ParkUnsendable(e.ctx, identity.DeliveryKey{}, "x"), ledger.ErrNotFound)
}

// The freshness fence before any attempt: Superseded names the intents whose source moved on,
// and ParkSuperseded parks those that are pending and held by nobody, with superseded_source,
// no attempt, and the transition in history and the outbox. The head, an intent without a
// source and a claimed intent are left as they are.
func TestTheFreshnessFenceParksOnlyFreeIntentsWhoseSourceMovedOn(t *testing.T) {
	t.Parallel()
	for _, iso := range isolations {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			e := newEnvAt(t, iso)
			const src = "https://example.org/a"
			old := e.submitWithSource("on the first version", src, "v1 body")
			claimed := e.claimWithSource("claimed on the first version", src, "v1 body")
			head := e.submitWithSource("on the second version", src, "v2 body")
			plain := e.submit("no source at all")
			keys := []identity.DeliveryKey{old, claimed.Key, head, plain}

			superseded, err := e.l.Superseded(e.ctx, keys)
			require.NoError(t, err)
			require.Equal(t, map[identity.DeliveryKey]bool{old: true, claimed.Key: true}, superseded)

			parked, err := e.l.ParkSuperseded(e.ctx, keys)
			require.NoError(t, err)
			require.Equal(t, map[identity.DeliveryKey]bool{old: true}, parked, "only the free superseded intent")
			in := e.intent(old)
			require.Equal(t, ledger.Parked, in.State)
			require.Equal(t, ledger.ReasonSupersededSource, in.Reason)
			require.Zero(t, e.attempts(old), "no attempt opened")
			require.Equal(t, 1, e.count(`SELECT count(*) FROM history WHERE delivery_key = $1 AND from_state = 'pending' AND to_state = 'parked' AND reason = 'superseded_source'`, old.Bytes()))
			require.Equal(t, 2, e.count(`SELECT count(*) FROM outbox WHERE delivery_key = $1`, old.Bytes()), "its creation and its parking wait in the outbox")
			for _, k := range []identity.DeliveryKey{claimed.Key, head, plain} {
				require.Equal(t, ledger.Pending, e.state(k))
			}

			// The claimed one is Authorize's to park, and it does.
			a, err := e.l.Authorize(e.ctx, claimed, inFlight, contract)
			require.NoError(t, err)
			require.Equal(t, ledger.ReasonSupersededSource, a.Reason)

			parked, err = e.l.ParkSuperseded(e.ctx, keys)
			require.NoError(t, err)
			require.Empty(t, parked, "a second fence parks nothing")
			_, err = e.l.ParkSuperseded(e.ctx, []identity.DeliveryKey{old, old})
			require.ErrorContains(t, err, "twice")
		})
	}
}
