package dispatch_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
)

// Held work leaves the queue (docs/design.md#held-work-leaves-the-queue): an account held with
// more due intents than the dispatcher consumer's MaxAckPending (4 x Concurrency) does not stall
// another account, whose intents are all published meanwhile; the held account's work items
// are acknowledged, the intents waiting pending, and when it serves again the sweeper publishes
// them again: every one is published, once.
func TestHeldWorkDoesNotStallOtherAccounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	otherSim, otherURL := e.Simulator(platformsim.Config{})
	e.addAccount("acct-2", fmt.Sprintf(`{"url":%q}`, otherURL))
	cfg := e.config()
	cfg.Concurrency = 4 // MaxAckPending 16
	cfg.Batch = 4
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, cfg)
	require.NoError(t, err)
	e.Run(d.Run)
	e.sweeping(200 * time.Millisecond)
	e.Exec(`INSERT INTO account_health (account_id, state, cause, next_probe_at) VALUES ('acct-1', 'holding', 'platform_unavailable', now() + INTERVAL '1 hour')`)

	held := e.Submit("acct-1", worldtest.Texts("due while held", 4*4*cfg.Concurrency)...)
	require.Eventually(t, func() bool { return dispatch.WorkCount(d, "gated_held") >= float64(len(held)) }, 30*time.Second, 20*time.Millisecond)
	others := e.Submit("acct-2", worldtest.Texts("another account", 20)...)
	intents := e.settle(others, 30*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: len(others)}, states(intents), "the other account's work is not stalled")
	for _, k := range others {
		require.Equal(t, 1, otherSim.Created(k.String()))
	}
	for _, k := range held {
		in := e.Intent(k)
		require.Equal(t, ledger.Pending, in.State, "held: pending, nothing lost")
		require.Zero(t, in.AttemptsAuthorized)
	}

	_, err = e.Ledger.ResumeAccount(e.Ctx, "acct-1", ledger.Actor{Name: "alice", Reason: "the platform is back"})
	require.NoError(t, err)
	intents = e.settle(held, 60*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: len(held)}, states(intents), "every held intent is published when the account serves again")
	for _, k := range held {
		require.Equal(t, 1, e.sim.Created(k.String()), "published once")
		require.Equal(t, 1, e.Intent(k).AttemptsAuthorized, "one attempt")
	}
}
