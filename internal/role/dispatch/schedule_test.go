package dispatch_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// submitEnvelope stores the intent of a raw envelope and relays its work item.
func (e *env) submitEnvelope(body string) identity.DeliveryKey {
	e.T.Helper()
	env, err := identity.ParseEnvelope([]byte(body))
	require.NoError(e.T, err)
	res, err := e.Ledger.Submit(e.Ctx, []identity.Envelope{env})
	require.NoError(e.T, err)
	require.Equal(e.T, ledger.Created, res[0].Outcome)
	_, err = e.Relay.Drain(e.Ctx)
	require.NoError(e.T, err)
	return res[0].Key
}

func (e *env) dbNow() time.Time {
	e.T.Helper()
	var now time.Time
	require.NoError(e.T, e.DB.Pool.QueryRow(e.Ctx, `SELECT now()`).Scan(&now))
	return now
}

// An intent with not_before 5 s ahead is sent once, and the platform receives it at or after
// not_before: before it, the dispatcher opened no attempt (its work item waited, NAK'd with the
// delay, instead of polling).
func TestAnIntentIsNotSentBeforeNotBefore(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	notBefore := e.dbNow().Add(5 * time.Second)
	key := e.submitEnvelope(fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":"at the stroke"},"not_before":%q}`, identity.FormatTime(notBefore)))
	e.run(e.config())
	time.Sleep(2 * time.Second) // the work item was taken and put back
	require.Zero(t, e.Count(`SELECT count(*) FROM attempts`), "no attempt before not_before")
	require.Zero(t, e.sim.Counts().Requests)

	intents := e.settle([]identity.DeliveryKey{key}, 20*time.Second)
	require.Equal(t, ledger.Published, intents[key].State)
	objs := e.sim.Objects(key.String())
	require.Len(t, objs, 1)
	require.False(t, objs[0].CreatedAt.Before(notBefore), "received at %s, not_before %s", objs[0].CreatedAt, notBefore)
	t.Logf("not_before %s, received %s (%s after)", notBefore.Format(time.RFC3339Nano), objs[0].CreatedAt.Format(time.RFC3339Nano), objs[0].CreatedAt.Sub(notBefore))
	require.Equal(t, 1, e.sim.Received(key.String()))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM attempts WHERE delivery_key = $1`, key.Bytes()))
}

// An intent whose expires_at has passed is parked expired, and the platform receives nothing.
func TestAnExpiredIntentIsParkedWithNoRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	key := e.submitEnvelope(fmt.Sprintf(`{"v":1,"account":"acct-1","action":"post","request":{"text":"yesterday's news"},"expires_at":%q}`,
		identity.FormatTime(e.dbNow().Add(-time.Second))))
	e.run(e.config())
	intents := e.settle([]identity.DeliveryKey{key}, 20*time.Second)
	require.Equal(t, ledger.Parked, intents[key].State)
	require.Equal(t, ledger.ReasonExpired, intents[key].Reason)
	require.Zero(t, e.sim.Counts().Requests)
	require.Zero(t, e.Count(`SELECT count(*) FROM attempts`))
}

// An intent cancelled before its work reached a dispatcher is parked cancelled, and the
// platform receives nothing.
func TestAnIntentCancelledBeforeAuthorizationIsNeverSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	keys := e.Submit("acct-1", "never mind")
	c, err := e.Ledger.Cancel(e.Ctx, "acct-1", keys[0], ledger.Actor{Name: "producer", Reason: "never mind"})
	require.NoError(t, err)
	require.True(t, c.Cancelled)
	e.run(e.config())
	time.Sleep(time.Second) // the work item is taken and dropped
	in := e.Intent(keys[0])
	require.Equal(t, ledger.Parked, in.State)
	require.Equal(t, ledger.ReasonCancelled, in.Reason)
	require.Zero(t, e.sim.Counts().Requests)
	require.Zero(t, e.Count(`SELECT count(*) FROM attempts`))
}
