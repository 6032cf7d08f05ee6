package sweep_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/ledger"
)

// hookSink is an alert webhook that keeps what it was sent and whether each was signed right.
type hookSink struct {
	mu     sync.Mutex
	got    []events.Alert
	signed []bool
}

func (h *hookSink) handler(secret string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var a events.Alert
		_ = json.Unmarshal(body, &a)
		h.mu.Lock()
		h.got = append(h.got, a)
		h.signed = append(h.signed, r.Header.Get(sweep.SignatureHeader) == sweep.Sign([]byte(secret), body))
		h.mu.Unlock()
	}
}

func (h *hookSink) alerts() ([]events.Alert, []bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]events.Alert{}, h.got...), append([]bool{}, h.signed...)
}

// A trip, a heal and a park are each told once: on atmost.alert.<kind>.<account-token> with
// their id as Nats-Msg-Id, and POSTed to the alert URL signed with the deployment's secret.
func TestTripsHealsAndParksAreToldOnNATSAndTheWebhook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hook := &hookSink{}
	srv := httptest.NewServer(hook.handler("s3cret"))
	t.Cleanup(srv.Close)
	nc, err := nats.Connect(e.NATSURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	got := make(chan *nats.Msg, 16)
	_, err = nc.ChanSubscribe(events.AlertSubjects, got)
	require.NoError(t, err)
	require.NoError(t, nc.Flush())

	s := e.sweeper("sweeper-1", sweep.Config{AlertURL: srv.URL, AlertSecret: "s3cret"})
	e.Run(s.Run)

	// A trip (auth failures) and the operator's resume; then an operator's park.
	e.Exec(`UPDATE policies SET trip_failures = 1 WHERE scope = ''`)
	for _, c := range e.authorized(e.Submit("acct-1", "refused credential")) {
		_, err := e.Ledger.Complete(e.Ctx, c, ledger.Outcome{Result: ledger.NotSent, Reason: ledger.ReasonPlatformRejected, Detail: map[string]any{"status": 401}})
		require.NoError(t, err)
	}
	_, err = e.Ledger.ResumeAccount(e.Ctx, "acct-1", ledger.Actor{Name: "alice", Reason: "rotated"})
	require.NoError(t, err)
	parked := e.Submit("acct-2", "stopped by a person")[0]
	require.NoError(t, e.Ledger.Park(e.Ctx, parked, ledger.Actor{Name: "bob", Reason: "not wanted"}))

	kinds := map[string]events.Alert{}
	for len(kinds) < 3 {
		select {
		case m := <-got:
			var a events.Alert
			require.NoError(t, json.Unmarshal(m.Data, &a))
			require.Equal(t, a.Subject(), m.Subject)
			require.Equal(t, a.ID, m.Header.Get(nats.MsgIdHdr))
			require.NotContains(t, kinds, a.Kind, "told once")
			kinds[a.Kind] = a
		case <-time.After(20 * time.Second):
			t.Fatalf("alerts told: %v", kinds)
		}
	}
	require.Equal(t, "acct-1", kinds[events.AlertHeld].Account)
	require.Equal(t, ledger.CauseAuthFailed, kinds[events.AlertHeld].Cause)
	require.Equal(t, "alice", kinds[events.AlertHealed].Actor)
	require.Equal(t, "rotated", kinds[events.AlertHealed].Why)
	require.Equal(t, parked, *kinds[events.AlertParked].DeliveryKey)
	require.Equal(t, ledger.ReasonOperatorParked, kinds[events.AlertParked].Reason)

	require.Eventually(t, func() bool { a, _ := hook.alerts(); return len(a) == 3 }, 20*time.Second, 20*time.Millisecond)
	posted, signed := hook.alerts()
	for i, a := range posted {
		require.True(t, signed[i], "alert %s signed with the secret", a.ID)
		require.Equal(t, kinds[a.Kind].ID, a.ID)
	}
}

// A webhook that does not answer never holds a pass back: the alerts beyond the bounded queue
// are dropped and counted, and the sweeper goes on.
func TestAnAlertWebhookThatHangsNeverBlocksThePass(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(func() { close(hang); srv.Close() })
	s := e.sweeper("sweeper-1", sweep.Config{AlertURL: srv.URL, AlertSecret: "x", AlertQueue: 2})
	e.Run(s.Run)
	for _, k := range e.Submit("acct-1", worldtest.Texts("parked", 10)...) {
		require.NoError(t, e.Ledger.Park(e.Ctx, k, ledger.Actor{Name: "bob", Reason: "not wanted"}))
	}
	require.Eventually(t, func() bool { return sweep.Dropped(s) >= 7 }, 20*time.Second, 20*time.Millisecond,
		"ten alerts, one in the webhook's hands, two queued: the rest dropped")
	// The webhook still hangs: a pass returns all the same.
	_, err := s.Pass(e.Ctx)
	require.NoError(t, err)
}
