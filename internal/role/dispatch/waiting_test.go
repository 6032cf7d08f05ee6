package dispatch_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// A held account is logged once per account and change, not at every redelivery of its work:
// an adapter that does not open, the same again and again, then another error, then the
// account served again; a gate (disabled) likewise. Its work waits meanwhile, no attempt made.
func TestAHeldAccountIsLoggedOncePerChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.Submit("acct-1", worldtest.Texts("waits for its adapter", 3)...)
	var broken atomic.Value
	broken.Store("the settings are being fixed")
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := e.config()
	cfg.GateDelay = 20 * time.Millisecond
	cfg.Logger = zap.New(core)
	cfg.Platforms = platform.Registry{sim.Name: func(a platform.Account) (platform.Adapter, error) {
		if why := broken.Load().(string); why != "" {
			return nil, errors.New(why)
		}
		return sim.Open(a)
	}}
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, cfg)
	require.NoError(t, err)
	e.Run(d.Run)
	waited := func(result string) float64 { return dispatch.WorkCount(d, result) }
	lines := func(msg string) int { return logs.FilterMessageSnippet(msg).Len() }
	const unavailable = "cannot open the account's platform adapter"

	require.Eventually(t, func() bool { return waited("adapter_unavailable") >= 30 }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, lines(unavailable), "one line for the account, however often its work came back")
	require.Zero(t, e.Count(`SELECT count(*) FROM attempts`), "no attempt while the adapter does not open")

	broken.Store("another error")
	before := waited("adapter_unavailable")
	require.Eventually(t, func() bool { return waited("adapter_unavailable") >= before+30 }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, 2, lines(unavailable), "a new error is a new state")
	require.Contains(t, logs.FilterMessageSnippet(unavailable).All()[1].ContextMap()["error"], "another error")

	broken.Store("")
	intents := e.settle(keys, 20*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 3}, states(intents))
	require.Equal(t, 1, lines("account served again"))

	_, err = e.Ledger.SetAccountDisabled(e.Ctx, "acct-1", true, ledger.Actor{Name: "test", Reason: "held"})
	require.NoError(t, err)
	more := e.Submit("acct-1", worldtest.Texts("waits for the enable", 2)...)
	require.Eventually(t, func() bool { return waited("gated_account_disabled") >= 30 }, 20*time.Second, 10*time.Millisecond)
	held := logs.FilterMessageSnippet("a gate holds the account")
	require.Equal(t, 1, held.Len())
	require.Equal(t, "account_disabled", held.All()[0].ContextMap()["reason"])
	for _, k := range more {
		require.Equal(t, ledger.Pending, e.Intent(k).State)
	}
	_, err = e.Ledger.SetAccountDisabled(e.Ctx, "acct-1", false, ledger.Actor{Name: "test", Reason: "go on"})
	require.NoError(t, err)
	intents = e.settle(more, 20*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 2}, states(intents))
	require.Equal(t, 2, lines("account served again"))
}
