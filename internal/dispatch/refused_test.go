package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// misreporting is the sim adapter with a bug: it sends for real, then reports "not sent" with
// a reason that only an unknown outcome may carry, which the ledger refuses to record.
type misreporting struct{ platform.Adapter }

func (m misreporting) Send(ctx context.Context, p platform.Prepared) platform.Outcome {
	o := m.Adapter.Send(ctx, p)
	o.Result, o.Reason = platform.NotSent, platform.ReasonSendUnknown
	return o
}

// An outcome the ledger refuses does not block the batch it came with or the completions
// behind it: it is recorded as unknown (indeterminate: reconciled, never resent), the others
// as they were.
func TestAnOutcomeTheLedgerRefusesIsRecordedAsUnknown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.submit("acct-1", texts("misreported", 5)...)
	cfg := e.config()
	cfg.Platforms = platform.Registry{sim.Name: func(a platform.Account) (platform.Adapter, error) {
		ad, err := sim.Open(a)
		return misreporting{ad}, err
	}}
	e.run(cfg)
	intents := e.settle(keys, 20*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Indeterminate: 5}, states(intents))
	for _, k := range keys {
		require.Equal(t, ledger.ReasonSendUnknown, intents[k].Reason)
		require.Equal(t, 1, e.sim.Created(k.String()))
		rec, err := e.ledger.Inspect(e.ctx, k)
		require.NoError(t, err)
		require.Contains(t, string(rec.Evidence[len(rec.Evidence)-1].Detail), "refused_outcome")
	}
}
