package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// slowAuthorize is the real ledger whose answers to Authorize arrive late (a slow database, a
// stalled connection): it notes when each call was made, and answers after delay.
type slowAuthorize struct {
	*ledger.Ledger
	delay time.Duration
	mu    sync.Mutex
	calls []time.Time
}

func (l *slowAuthorize) AuthorizeMany(ctx context.Context, claims []ledger.Claim, inFlight time.Duration, contract string) ([]ledger.AuthorizationResult, error) {
	l.mu.Lock()
	l.calls = append(l.calls, time.Now())
	l.mu.Unlock()
	res, err := l.Ledger.AuthorizeMany(ctx, claims, inFlight, contract)
	time.Sleep(l.delay)
	return res, err
}

// deadlines is an adapter that notes the deadline of each send's context.
type deadlines struct {
	platform.Adapter
	mu   sync.Mutex
	seen []time.Time
}

func (a *deadlines) Send(ctx context.Context, p platform.Prepared) platform.Outcome {
	d, ok := ctx.Deadline()
	a.mu.Lock()
	if ok {
		a.seen = append(a.seen, d)
	} else {
		a.seen = append(a.seen, time.Time{})
	}
	a.mu.Unlock()
	return a.Adapter.Send(ctx, p)
}

// The in-flight lease starts in the database during Authorize, so no byte may leave after a
// deadline counted from before the call: a slow answer from the database eats the send's time,
// never the lease's margin. The send's context ends there even when the send timeout would
// run past it.
func TestASlowAuthorizeAnswerShortensTheSendNotTheLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	key := e.Submit("acct-1", "authorized slowly")[0]
	real, err := ledger.New(e.DB.AppPool(t), ledger.Config{Actor: "dispatcher"})
	require.NoError(t, err)
	l := &slowAuthorize{Ledger: real, delay: 3500 * time.Millisecond}
	ad := &deadlines{}
	cfg := e.config()
	cfg.InFlightLease, cfg.Margin, cfg.SendTimeout, cfg.ReadBackTimeout = 8*time.Second, time.Second, 5*time.Second, time.Second
	cfg.Platforms = platform.Registry{sim.Name: func(acct platform.Account) (platform.Adapter, error) {
		a, err := sim.Open(acct)
		ad.Adapter = a
		return ad, err
	}}
	d, err := dispatch.New(e.Ctx, e.JS, l, e.Relay, cfg)
	require.NoError(t, err)
	e.Run(d.Run)
	e.settle([]identity.DeliveryKey{key}, 30*time.Second)

	l.mu.Lock()
	calls := append([]time.Time(nil), l.calls...)
	l.mu.Unlock()
	ad.mu.Lock()
	seen := append([]time.Time(nil), ad.seen...)
	ad.mu.Unlock()
	require.Len(t, calls, 1)
	require.Len(t, seen, 1)
	require.False(t, seen[0].IsZero(), "the send has a deadline")
	latest := calls[0].Add(cfg.InFlightLease - cfg.Margin)
	require.False(t, seen[0].After(latest), "the send's context ends %s after the latest the lease allows", seen[0].Sub(latest))
}
