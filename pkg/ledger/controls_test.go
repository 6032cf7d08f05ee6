package ledger_test

import (
	"testing"
	"time"

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
	_, err = e.l.SetSwitch(e.ctx, account, true, "alice", "incident 42")
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

	_, err = e.l.SetSwitch(e.ctx, account, false, "alice", "resolved")
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
	require.NoError(t, e.l.SetPolicy(e.ctx, account, ledger.PolicyOverride{AttemptCap: &cap5}, "alice"))
	p, err := e.l.PolicyFor(e.ctx, account)
	require.NoError(t, err)
	require.Equal(t, 5, p.AttemptCap)
	def, err := e.l.PolicyFor(e.ctx, ledger.GlobalScope)
	require.NoError(t, err)
	require.Equal(t, 3, def.AttemptCap)
	require.Equal(t, def.TextWindow, p.TextWindow, "unset columns inherit")
	require.Equal(t, 24*time.Hour, def.TextWindow)

	require.Error(t, e.l.SetPolicy(e.ctx, account, ledger.PolicyOverride{RetryableReasons: []ledger.Reason{ledger.ReasonSendUnknown}}, "alice"),
		"an indeterminate reason can never be made retryable")
	require.Error(t, e.l.SetPolicy(e.ctx, ledger.GlobalScope, ledger.PolicyOverride{AttemptCap: &cap5}, "alice"),
		"the default policy must set every column")

	// Raising the cap lets a parked-by-Begin intent's successors through; the cap is read on
	// every Begin, never cached.
	one := 1
	require.NoError(t, e.l.SetPolicy(e.ctx, account, ledger.PolicyOverride{AttemptCap: &one}, "alice"))
	c := e.authorized("capped at one")
	_, err = e.l.Complete(e.ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonConnectionFailed})
	require.NoError(t, err)
	requireRefused(t, e.l.Retry(e.ctx, c.Key), ledger.ErrAttemptsExhausted)
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

func TestListByStatePagesInKeyOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := 0; i < 5; i++ {
		e.submit(string(rune('a' + i)))
	}
	e.authorized("not pending")
	first, err := e.l.ListByState(e.ctx, ledger.Pending, identity.DeliveryKey{}, 3)
	require.NoError(t, err)
	require.Len(t, first, 3)
	rest, err := e.l.ListByState(e.ctx, ledger.Pending, first[2].Key, 10)
	require.NoError(t, err)
	require.Len(t, rest, 2)
	require.Less(t, first[2].Key.String(), rest[0].Key.String())
	_, err = e.l.ListByState(e.ctx, "in_flight", identity.DeliveryKey{}, 1)
	require.Error(t, err)
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
