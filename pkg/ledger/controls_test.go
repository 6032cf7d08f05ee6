package ledger_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestKillSwitchThroughTheLedgerStopsAuthorization(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stopped, err := e.l.Stopped(e.ctx, account)
	require.NoError(t, err)
	require.False(t, stopped)

	c := e.claim("switched")
	_, err = e.l.SetSwitch(e.ctx, account, true, ledger.Actor{Name: "alice", Reason: "incident 42"})
	require.NoError(t, err)
	stopped, err = e.l.Stopped(e.ctx, account)
	require.NoError(t, err)
	require.True(t, stopped)
	other, err := e.l.Stopped(e.ctx, "acct-other")
	require.NoError(t, err)
	require.False(t, other, "an account's switch stops that account only")

	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonKillSwitch, a.Reason)

	_, err = e.l.SetSwitch(e.ctx, account, false, ledger.Actor{Name: "alice", Reason: "resolved"})
	require.NoError(t, err)
	switches, err := e.l.Switches(e.ctx)
	require.NoError(t, err)
	require.Len(t, switches, 1)
	require.False(t, switches[0].Engaged)
	require.Equal(t, "alice", switches[0].Actor)
}

func TestPolicyOverridesInheritTheDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cap5 := 5
	setCap := func(scope string, cap *int) error {
		_, err := e.l.SetPolicy(e.ctx, scope, ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: cap}}, ledger.Actor{Name: "alice", Reason: "test"})
		return err
	}
	require.NoError(t, setCap(account, &cap5))
	p, err := e.l.PolicyFor(e.ctx, account)
	require.NoError(t, err)
	require.Equal(t, 5, p.AttemptCap)
	def, err := e.l.PolicyFor(e.ctx, ledger.GlobalScope)
	require.NoError(t, err)
	require.Equal(t, 3, def.AttemptCap)
	require.Equal(t, def.TextWindow, p.TextWindow, "unset columns inherit")
	require.Equal(t, 24*time.Hour, def.TextWindow)

	_, err = e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{RetryableReasons: []ledger.Reason{ledger.ReasonSendUnknown}}}, ledger.Actor{Name: "alice", Reason: "test"})
	require.ErrorContains(t, err, "connection_failed", "an indeterminate reason can never be made retryable; the error lists those that can")
	_, err = e.l.SetPolicy(e.ctx, ledger.GlobalScope, ledger.PolicyEdit{Inherit: []ledger.PolicyField{ledger.FieldAttemptCap}}, ledger.Actor{Name: "alice", Reason: "test"})
	require.Error(t, err, "the default policy must set every column")

	// Raising the cap lets a parked-by-Begin intent's successors through; the cap is read on
	// every Begin, never cached.
	one := 1
	require.NoError(t, setCap(account, &one))
	c := e.authorized("capped at one")
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	requireRefused(t, e.l.Retry(e.ctx, c.Key), ledger.ErrAttemptsExhausted)
}

// A policy change names some fields; the others keep the values the row holds when the change
// runs, so two operators changing different fields never undo each other.
func TestSetPolicyChangesOnlyTheFieldsItNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cap5, burst := 5, 4
	window := time.Hour
	_, err := e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: &cap5, TextWindow: &window}}, ledger.Actor{Name: "alice", Reason: "first"})
	require.NoError(t, err)
	change, err := e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{RateBurst: &burst}, Inherit: []ledger.PolicyField{ledger.FieldTextWindow}}, ledger.Actor{Name: "bob", Reason: "second"})
	require.NoError(t, err)
	require.NotNil(t, change.Before)
	require.Equal(t, &cap5, change.Before.AttemptCap)
	require.Equal(t, &window, change.Before.TextWindow)
	require.Nil(t, change.Before.RateBurst)
	require.Equal(t, ledger.PolicyOverride{AttemptCap: &cap5, RateBurst: &burst}, change.After, "the cap stays, the burst is set, the window inherits again")

	layers, err := e.l.PolicyLayersFor(e.ctx, account)
	require.NoError(t, err)
	require.NotNil(t, layers.Override)
	require.Equal(t, change.After, layers.Override.PolicyOverride)
	require.Equal(t, "bob", layers.Override.UpdatedBy)
	effective, err := e.l.PolicyFor(e.ctx, account)
	require.NoError(t, err)
	require.Equal(t, effective, layers.Effective, "the layers agree with the policy the paths read")
	_, err = e.l.PolicyLayersFor(e.ctx, "acct-nobody")
	require.ErrorIs(t, err, ledger.ErrUnknownAccount, "the default policy is not the answer for an account that does not exist")
	layers, err = e.l.PolicyLayersFor(e.ctx, ledger.GlobalScope)
	require.NoError(t, err)
	require.Nil(t, layers.Override)

	// The default keeps every field when one changes.
	base := 2 * time.Second
	_, err = e.l.SetPolicy(e.ctx, ledger.GlobalScope, ledger.PolicyEdit{Set: ledger.PolicyOverride{BackoffBase: &base}}, ledger.Actor{Name: "alice", Reason: "faster first retry"})
	require.NoError(t, err)
	def, err := e.l.PolicyFor(e.ctx, ledger.GlobalScope)
	require.NoError(t, err)
	require.Equal(t, base, def.BackoffBase)
	require.Equal(t, 3, def.AttemptCap)

	rows, err := e.l.Policies(e.ctx)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, ledger.GlobalScope, rows[0].Scope)
	require.Equal(t, account, rows[1].Scope)
}

func TestSetPolicyRefusesWhatItCannotStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	zero, negative, subSecond := 0, -time.Second, 1500*time.Millisecond
	for name, edit := range map[string]ledger.PolicyEdit{
		"cap below one":        {Set: ledger.PolicyOverride{AttemptCap: &zero}},
		"burst below one":      {Set: ledger.PolicyOverride{RateBurst: &zero}},
		"negative backoff":     {Set: ledger.PolicyOverride{BackoffBase: &negative}},
		"window not in s":      {Set: ledger.PolicyOverride{TextWindow: &subSecond}},
		"set and inherited":    {Set: ledger.PolicyOverride{AttemptCap: &zero}, Inherit: []ledger.PolicyField{ledger.FieldAttemptCap}},
		"unknown field":        {Inherit: []ledger.PolicyField{"colour"}},
		"terminal reason":      {Set: ledger.PolicyOverride{RetryableReasons: []ledger.Reason{ledger.ReasonDuplicateText}}},
		"reason outside table": {Set: ledger.PolicyOverride{RetryableReasons: []ledger.Reason{"bad_luck"}}},
	} {
		_, err := e.l.SetPolicy(e.ctx, account, edit, ledger.Actor{Name: "alice", Reason: "test"})
		require.Error(t, err, name)
	}
	cap5 := 5
	_, err := e.l.SetPolicy(e.ctx, "acct-nobody", ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: &cap5}}, ledger.Actor{Name: "alice", Reason: "test"})
	require.ErrorIs(t, err, ledger.ErrUnknownAccount)
	_, err = e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: &cap5}}, ledger.Actor{Name: " ", Reason: "test"})
	require.Error(t, err, "an operator must be named")
	require.Zero(t, e.count(`SELECT count(*) FROM policies WHERE scope <> ''`))
	require.Zero(t, e.count(`SELECT count(*) FROM control_history`), "a refused change leaves no history")
}

// The health thresholds and the backoff factor are policy fields like the others: set, shown,
// inherited and recorded in the control history with before and after, each held to its range
// at its edges, in the ledger's check and in the table's.
func TestHealthPolicyFieldsAreSetLikeTheOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tryExec := func(sql string) error { _, err := e.pool.Exec(e.ctx, sql); return err }
	def, err := e.l.PolicyFor(e.ctx, ledger.GlobalScope)
	require.NoError(t, err)
	require.Equal(t, ledger.Policy{AttemptCap: def.AttemptCap, BackoffBase: def.BackoffBase, BackoffMax: def.BackoffMax,
		RatePerMinute: def.RatePerMinute, RateBurst: def.RateBurst, TextWindow: def.TextWindow, RetryableReasons: def.RetryableReasons,
		BackoffFactor: 2, TripFailures: def.TripFailures, TripUnknowns: def.TripUnknowns, TripWindow: 5 * time.Minute,
		ProbeBase: 5 * time.Second, ProbeMax: 30 * time.Second}, def, "the default's health fields as migrations set them")

	// The edges of every range are accepted, by the ledger and by the table.
	one, zero, factor := 1, 0, ledger.MinBackoffFactor
	window, probe := time.Second, time.Millisecond
	edit := ledger.PolicyEdit{Set: ledger.PolicyOverride{TripFailures: &one, TripUnknowns: &zero, TripWindow: &window,
		ProbeBase: &probe, ProbeMax: &probe, BackoffFactor: &factor}}
	change, err := e.l.SetPolicy(e.ctx, account, edit, ledger.Actor{Name: "alice", Reason: "trip at once"})
	require.NoError(t, err)
	require.Nil(t, change.Before)
	require.Equal(t, edit.Set, change.After)
	p, err := e.l.PolicyFor(e.ctx, account)
	require.NoError(t, err)
	require.Equal(t, 1, p.TripFailures)
	require.Zero(t, p.TripUnknowns)
	require.Equal(t, time.Second, p.TripWindow)
	require.Equal(t, time.Millisecond, p.ProbeBase)
	require.Equal(t, time.Millisecond, p.ProbeMax)
	require.InDelta(t, 1.0, p.BackoffFactor, 0)
	require.Equal(t, def.AttemptCap, p.AttemptCap, "the fields not set inherit")

	most := ledger.MaxBackoffFactor
	change, err = e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{BackoffFactor: &most},
		Inherit: []ledger.PolicyField{ledger.FieldTripFailures, ledger.FieldTripUnknowns, ledger.FieldTripWindow, ledger.FieldProbeBase, ledger.FieldProbeMax}},
		ledger.Actor{Name: "bob", Reason: "back to the default's thresholds"})
	require.NoError(t, err)
	require.NotNil(t, change.Before)
	require.Equal(t, edit.Set, *change.Before)
	require.Equal(t, ledger.PolicyOverride{BackoffFactor: &most}, change.After)
	p, err = e.l.PolicyFor(e.ctx, account)
	require.NoError(t, err)
	require.Equal(t, def.TripFailures, p.TripFailures)
	require.Equal(t, def.ProbeMax, p.ProbeMax)
	require.InDelta(t, most, p.BackoffFactor, 0)

	hist, err := e.l.ControlHistory(e.ctx, "policy", 1)
	require.NoError(t, err)
	require.JSONEq(t, `{"attempt_cap": null, "backoff_base_ms": null, "backoff_max_ms": null, "rate_per_minute": null,
		"rate_burst": null, "text_window_seconds": null, "retryable_reasons": null, "trip_failures": 1, "trip_unknowns": 0,
		"trip_window_seconds": 1, "probe_base_ms": 1, "probe_max_ms": 1, "backoff_factor": 1}`, string(hist[0].Before))
	require.JSONEq(t, `{"attempt_cap": null, "backoff_base_ms": null, "backoff_max_ms": null, "rate_per_minute": null,
		"rate_burst": null, "text_window_seconds": null, "retryable_reasons": null, "trip_failures": null, "trip_unknowns": null,
		"trip_window_seconds": null, "probe_base_ms": null, "probe_max_ms": null, "backoff_factor": 10}`, string(hist[0].After))

	// The default changes and keeps every field; it cannot inherit one.
	three := 3
	_, err = e.l.SetPolicy(e.ctx, ledger.GlobalScope, ledger.PolicyEdit{Set: ledger.PolicyOverride{TripFailures: &three}}, ledger.Actor{Name: "alice", Reason: "default"})
	require.NoError(t, err)
	require.ErrorContains(t, ledger.PolicyEdit{Inherit: []ledger.PolicyField{ledger.FieldProbeBase}}.Check(ledger.GlobalScope), "must set every field")
	require.Error(t, tryExec(`UPDATE policies SET probe_max_ms = NULL WHERE scope = ''`), "the table keeps the default complete")

	// One past each edge is refused, with the range in the message, before the database.
	negOne, justBelow, justAbove := -1, 0.999, 10.001
	subMilli, subS, zeroD := 1500*time.Microsecond, 1500*time.Millisecond, time.Duration(0)
	nan := math.NaN()
	for _, c := range []struct {
		set  ledger.PolicyOverride
		says string
	}{
		{ledger.PolicyOverride{TripFailures: &zero}, "trip failures 0: it must be at least 1"},
		{ledger.PolicyOverride{TripUnknowns: &negOne}, "trip unknowns -1: it must be at least 0"},
		{ledger.PolicyOverride{TripWindow: &zeroD}, "trip window 0s: it must be a whole number of seconds, at least 1"},
		{ledger.PolicyOverride{TripWindow: &subS}, "trip window 1.5s: it must be a whole number of seconds"},
		{ledger.PolicyOverride{ProbeBase: &zeroD}, "probe base 0s: it must be a whole number of milliseconds, at least 1"},
		{ledger.PolicyOverride{ProbeMax: &zeroD}, "probe max 0s: it must be a whole number of milliseconds, at least 1"},
		{ledger.PolicyOverride{ProbeBase: &subMilli}, "probe base 1.5ms: it must be a whole number of milliseconds"},
		{ledger.PolicyOverride{BackoffFactor: &justBelow}, "backoff factor 0.999: it must lie between 1 (a constant delay) and 10"},
		{ledger.PolicyOverride{BackoffFactor: &justAbove}, "backoff factor 10.001: it must lie between 1"},
		{ledger.PolicyOverride{BackoffFactor: &nan}, "backoff factor NaN"},
	} {
		require.ErrorContains(t, ledger.PolicyEdit{Set: c.set}.Check(account), c.says)
		_, err := e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: c.set}, ledger.Actor{Name: "alice", Reason: "test"})
		require.ErrorContains(t, err, c.says)
	}
	require.ErrorContains(t, ledger.PolicyEdit{Set: ledger.PolicyOverride{TripFailures: &one}, Inherit: []ledger.PolicyField{ledger.FieldTripFailures}}.Check(account), "both set and inherited")
	// The table refuses what the ledger refuses, for a change made by hand.
	for _, stmt := range []string{
		`UPDATE policies SET trip_failures = 0 WHERE scope = ''`,
		`UPDATE policies SET trip_unknowns = -1 WHERE scope = ''`,
		`UPDATE policies SET trip_window_seconds = 0 WHERE scope = ''`,
		`UPDATE policies SET probe_base_ms = 0 WHERE scope = ''`,
		`UPDATE policies SET backoff_factor = 0.5 WHERE scope = ''`,
		`UPDATE policies SET backoff_factor = 11 WHERE scope = ''`,
	} {
		require.Error(t, tryExec(stmt), stmt)
	}
}

// Every operator change to a control appends exactly one control_history row, in the same
// statement, naming the operator and the reason, with the settings before and after.
func TestEveryControlChangeIsRecordedWithItsOperator(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	sw, err := e.l.SetSwitch(e.ctx, ledger.GlobalScope, true, ledger.Actor{Name: "user:alice", Reason: "incident 7"})
	require.NoError(t, err)
	require.Nil(t, sw.Before, "the global switch had never been set")
	require.True(t, sw.After.Engaged)
	sw, err = e.l.SetSwitch(e.ctx, ledger.GlobalScope, false, ledger.Actor{Name: "user:bob", Reason: "incident 7 resolved"})
	require.NoError(t, err)
	require.NotNil(t, sw.Before)
	require.True(t, sw.Before.Engaged)
	require.Equal(t, "user:alice", sw.Before.Actor)
	require.False(t, sw.After.Engaged)

	cap5 := 5
	_, err = e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: &cap5}}, ledger.Actor{Name: "user:carol", Reason: "noisy platform"})
	require.NoError(t, err)
	epoch, err := e.l.BumpEpoch(e.ctx, ledger.Actor{Name: "user:dave", Reason: "restored from backup"})
	require.NoError(t, err)
	require.Equal(t, int64(2), epoch)
	started, err := e.l.CurrentEpoch(e.ctx)
	require.NoError(t, err)
	require.Equal(t, ledger.EpochStart{Epoch: 2, Reason: "restored from backup", Actor: "user:dave", At: started.At}, started)

	all, err := e.l.ControlHistory(e.ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, all, 4, "one row per change")
	require.Equal(t, []string{"epoch", "policy", "switch", "switch"}, []string{all[0].Kind, all[1].Kind, all[2].Kind, all[3].Kind}, "newest first")
	require.Equal(t, "user:dave", all[0].Actor)
	require.JSONEq(t, `{"epoch": 1}`, string(all[0].Before))
	require.JSONEq(t, `{"epoch": 2}`, string(all[0].After))
	require.Equal(t, account, all[1].Scope)
	require.Equal(t, "noisy platform", all[1].Reason)
	require.JSONEq(t, `null`, string(all[1].Before), "the account had no policy row")
	require.JSONEq(t, `{"attempt_cap": 5, "backoff_base_ms": null, "backoff_max_ms": null, "rate_per_minute": null,
		"rate_burst": null, "text_window_seconds": null, "retryable_reasons": null, "trip_failures": null, "trip_unknowns": null,
		"trip_window_seconds": null, "probe_base_ms": null, "probe_max_ms": null, "backoff_factor": null}`, string(all[1].After))
	require.Equal(t, "user:bob", all[2].Actor)
	require.Equal(t, ledger.GlobalScope, all[2].Scope)
	require.JSONEq(t, `{"engaged": true, "reason": "incident 7"}`, string(all[2].Before))
	require.JSONEq(t, `{"engaged": false, "reason": "incident 7 resolved"}`, string(all[2].After))
	require.JSONEq(t, `null`, string(all[3].Before))

	switches, err := e.l.ControlHistory(e.ctx, "switch", 1)
	require.NoError(t, err)
	require.Len(t, switches, 1)
	require.Equal(t, all[2], switches[0])
	_, err = e.l.ControlHistory(e.ctx, "lever", 1)
	require.Error(t, err)

	_, err = e.l.SetSwitch(e.ctx, "acct-nobody", true, ledger.Actor{Name: "user:alice", Reason: "typo"})
	require.ErrorIs(t, err, ledger.ErrUnknownAccount, "a switch for an account that does not exist would stop nothing")
	require.Equal(t, 4, e.count(`SELECT count(*) FROM control_history`))
}

// The ledger runs as the application role, which may append to the control history and read
// it, never rewrite or remove it.
func TestAppRoleCannotRewriteTheControlHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.l.SetSwitch(e.ctx, account, true, ledger.Actor{Name: "user:alice", Reason: "incident"})
	require.NoError(t, err)
	for _, stmt := range []string{
		`UPDATE control_history SET actor = 'someone else'`,
		`DELETE FROM control_history`,
		`TRUNCATE control_history`,
	} {
		_, err := e.app.Exec(e.ctx, stmt)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr, stmt)
		require.Equal(t, "42501", pgErr.Code, "%s: %s", stmt, pgErr.Message)
	}
	require.Equal(t, 1, e.count(`SELECT count(*) FROM control_history WHERE actor = 'user:alice'`))
}

func TestSourceHeadAdvancesToTheNewestVersionWhateverIsStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v1, _, err := identity.NewSourceVersion("https://example.org/a", "first body")
	require.NoError(t, err)
	v2, raw2, err := identity.NewSourceVersion("https://example.org/a", "second body")
	require.NoError(t, err)

	replaced, changed, err := e.l.AdvanceSourceHead(e.ctx, "https://example.org/a", v1, identity.RawHash{})
	require.NoError(t, err)
	require.Nil(t, replaced)
	require.True(t, changed)
	replaced, changed, err = e.l.AdvanceSourceHead(e.ctx, "https://example.org/a", v2, raw2)
	require.NoError(t, err)
	require.True(t, changed)
	require.Equal(t, v1, *replaced)
	_, changed, err = e.l.AdvanceSourceHead(e.ctx, "https://example.org/a", v2, raw2)
	require.NoError(t, err)
	require.False(t, changed, "the same head again changes nothing")

	// An intent resting on v1 is now superseded at authorization.
	c := e.claimWithSource("about a", "https://example.org/a", "first body")
	a, err := e.l.Authorize(e.ctx, c, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonSupersededSource, a.Reason)
}

// A producer moves a source's head simply by submitting an intent on a newer version; intents
// on the version it replaced are parked at authorization, not sent.
func TestSubmittingANewVersionSupersedesTheStoredHead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	old := e.claimWithSource("about v1", "https://example.org/a", "first body")
	fresh := e.claimWithSource("about v2", "https://example.org/a", "second body")
	// A late intent on the old version does not turn the head back.
	late := e.claimWithSource("late, about v1", "https://example.org/a", "first body")
	l, err := e.l.Authorize(e.ctx, late, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonSupersededSource, l.Reason)
	a, err := e.l.Authorize(e.ctx, old, inFlight, contract)
	require.NoError(t, err)
	require.Equal(t, ledger.ReasonSupersededSource, a.Reason)
	b, err := e.l.Authorize(e.ctx, fresh, inFlight, contract)
	require.NoError(t, err)
	require.True(t, b.Authorized(), "reason %s", b.Reason)
}

// Two operators create the same kill switch at once; the second one's statement waits for the
// first one's row. It must never record a before that was not the row it replaced, and it must
// not fail: SERIALIZABLE restarts its transaction, READ COMMITTED runs its statement again on
// top of the first one's switch. Both changes are in the history, which chains.
func TestSwitchSetThatWaitedOnAnotherNeverRecordsAWrongBefore(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			_, err := l.SetSwitch(e.ctx, account, true, ledger.Actor{Name: "user:alice", Reason: "incident"})
			return err
		}, func() error {
			_, err := e.l.SetSwitch(e.ctx, account, false, ledger.Actor{Name: "user:bob", Reason: "false alarm"})
			return err
		})
		require.NoError(t, firstErr)
		require.NoError(t, secondErr, "it replaced the first one's switch")
		require.Equal(t, 2, e.count(`SELECT count(*) FROM control_history`))
		requireHistoryChains(t, e, "switch")
		engaged := e.count(`SELECT count(*) FROM switches WHERE scope = $1 AND engaged`, account)
		require.Zero(t, engaged, "bob's change came last")
	})
}

// Two operators change an existing kill switch at once; the second one's statement waits for
// the first one's row. Its history row records the first one's change as its before, never the
// switch as its snapshot saw it before that change.
func TestSwitchSetThatWaitedOnAChangeRecordsItAsItsBefore(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		_, err := e.l.SetSwitch(e.ctx, account, false, ledger.Actor{Name: "user:carol", Reason: "the switch exists"})
		require.NoError(t, err)
		var second ledger.SwitchChange
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			_, err := l.SetSwitch(e.ctx, account, true, ledger.Actor{Name: "user:alice", Reason: "incident"})
			return err
		}, func() (err error) {
			second, err = e.l.SetSwitch(e.ctx, account, false, ledger.Actor{Name: "user:bob", Reason: "false alarm"})
			return err
		})
		require.NoError(t, firstErr)
		require.NoError(t, secondErr)
		require.NotNil(t, second.Before)
		require.True(t, second.Before.Engaged, "bob replaced alice's switch, and says so")
		require.Equal(t, "incident", second.Before.Reason)
		require.Equal(t, 3, e.count(`SELECT count(*) FROM control_history WHERE kind = 'switch'`))
		requireHistoryChains(t, e, "switch")
	})
}

// Two operators change different fields of one account's policy at once: both changes stay.
func TestPolicySetThatWaitedOnAnotherKeepsItsChange(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		cap5, burst := 5, 4
		_, err := e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: &cap5}}, ledger.Actor{Name: "user:carol", Reason: "the row exists"})
		require.NoError(t, err)
		cap7 := 7
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			_, err := l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: &cap7}}, ledger.Actor{Name: "user:alice", Reason: "more attempts"})
			return err
		}, func() error {
			_, err := e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{RateBurst: &burst}}, ledger.Actor{Name: "user:bob", Reason: "bigger bursts"})
			return err
		})
		require.NoError(t, firstErr)
		require.NoError(t, secondErr)
		layers, err := e.l.PolicyLayersFor(e.ctx, account)
		require.NoError(t, err)
		require.Equal(t, ledger.PolicyOverride{AttemptCap: &cap7, RateBurst: &burst}, layers.Override.PolicyOverride)
		requireHistoryChains(t, e, "policy")
	})
}

// Two operators create one account's policy row at once, each setting a different field; the
// second one's statement waits for the first one's insert. Neither change is lost, and the
// second is recorded as made on top of the first (its before is the first's after, never null):
// SERIALIZABLE restarts it, READ COMMITTED runs the statement again on the row it now sees.
func TestPolicySetsThatCreateOneRowAtOnceKeepBothChanges(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, e *env) {
		cap7, burst := 7, 4
		firstErr, secondErr := e.interleave(1, func(l *ledger.Ledger) error {
			_, err := l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{AttemptCap: &cap7}}, ledger.Actor{Name: "user:alice", Reason: "more attempts"})
			return err
		}, func() error {
			_, err := e.l.SetPolicy(e.ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{RateBurst: &burst}}, ledger.Actor{Name: "user:bob", Reason: "bigger bursts"})
			return err
		})
		require.NoError(t, firstErr)
		require.NoError(t, secondErr)
		layers, err := e.l.PolicyLayersFor(e.ctx, account)
		require.NoError(t, err)
		require.NotNil(t, layers.Override)
		require.Equal(t, ledger.PolicyOverride{AttemptCap: &cap7, RateBurst: &burst}, layers.Override.PolicyOverride, "bob's creation did not undo alice's")
		require.Equal(t, 2, e.count(`SELECT count(*) FROM control_history WHERE kind = 'policy'`))
		requireHistoryChains(t, e, "policy")
	})
}

// requireHistoryChains checks that every control_history row of kind after the first records
// as its before exactly what the row before it recorded as its after.
func requireHistoryChains(t *testing.T, e *env, kind string) {
	t.Helper()
	rows, err := e.l.ControlHistory(e.ctx, kind, 100)
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	for i := 0; i+1 < len(rows); i++ { // newest first
		require.JSONEq(t, string(rows[i+1].After), string(rows[i].Before), "history row %d of %s", i, kind)
	}
	require.JSONEq(t, "null", string(rows[len(rows)-1].Before), "the first %s row created the control", kind)
}

// Within one batch, the head is decided by the intents the batch created, the last in batch
// order: a later intent that was refused (unknown account) or already stored (duplicate) never
// decides it, so the intent on a new version is not left superseded by nothing.
func TestTheHeadOfABatchIsItsLastCreatedIntent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const src = "https://example.org/a"
	on := func(acct, text, body string) identity.Envelope {
		version, _, err := identity.NewSourceVersion(src, body)
		require.NoError(t, err)
		req, err := json.Marshal(map[string]string{"text": text})
		require.NoError(t, err)
		env, err := identity.NewEnvelope(acct, "post", "", req, "", &identity.Source{ID: src, Version: version})
		require.NoError(t, err)
		return env
	}
	stored := on(account, "stored before", "v0 body")
	_, err := e.l.Submit(e.ctx, []identity.Envelope{stored})
	require.NoError(t, err)

	res, err := e.l.Submit(e.ctx, []identity.Envelope{
		on(account, "on v1", "v1 body"),
		on(account, "on v2", "v2 body"),
		on("nobody", "refused, on v3", "v3 body"),
		stored, // a duplicate, on v0
	})
	require.NoError(t, err)
	require.Equal(t, []ledger.SubmitOutcome{ledger.Created, ledger.Created, ledger.UnknownAccount, ledger.Duplicate},
		[]ledger.SubmitOutcome{res[0].Outcome, res[1].Outcome, res[2].Outcome, res[3].Outcome})
	superseded, err := e.l.Superseded(e.ctx, []identity.DeliveryKey{res[0].Key, res[1].Key, res[3].Key})
	require.NoError(t, err)
	require.Equal(t, map[identity.DeliveryKey]bool{res[0].Key: true, res[3].Key: true}, superseded,
		"v2, the last created, is the head; v1 and v0 are superseded")
}
