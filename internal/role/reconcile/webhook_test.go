package reconcile_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/webhook"
)

// A webhook without read-back confirms a success by its status lookup (status_url): the send's
// success goes indeterminate, and the one lookup, answering for the delivery key with the
// object's id, publishes it (reconciled_found), never parks it for a person.
func TestAWebhookStatusLookupConfirmsASuccessWithoutReadBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	var lookups atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/hook":
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":"obj-%s"}`, r.Header.Get("Idempotency-Key"))
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/status/"):
			lookups.Add(1)
			fmt.Fprintf(w, `{"id":"obj-%s"}`, strings.TrimPrefix(r.URL.Path, "/status/"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(hook.Close)
	settings := fmt.Sprintf(`{"url":%q,"status_url":%q,"reconcile_delay":%q}`, hook.URL+"/hook", hook.URL+"/status/{key}", reconcileDelay.String())
	require.NoError(t, e.Ledger.AddAccount(e.Ctx, ledger.Account{ID: "hook-1", Platform: webhook.Name, Settings: json.RawMessage(settings)}, ledger.Actor{Name: "test", Reason: "a webhook"}))
	registry := platform.Registry{webhook.Name: webhook.Open}
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, dispatch.Config{
		Platforms: registry, Batch: 16, Concurrency: 32,
		ClaimLease: ledger.MinLease, InFlightLease: ledger.MinLease, SendTimeout: time.Second,
		ReadBackTimeout: 500 * time.Millisecond, Margin: time.Second, GateDelay: 200 * time.Millisecond, AckWait: 2 * time.Second,
	})
	require.NoError(t, err)
	stop := e.Run(d.Run)
	keys := e.Submit("hook-1", worldtest.Texts("confirmed by its status", 2)...)
	e.Settle(keys, 30*time.Second, func(s ledger.State) bool { return s == ledger.Pending || s == ledger.Authorized })
	stop()
	for _, k := range keys {
		require.Equal(t, ledger.ReasonReadbackMismatch, e.Intent(k).Reason, "nothing to read back: the lookup decides")
	}
	cfg := e.config()
	cfg.Platforms = registry
	e.run("reconciler-1", cfg)
	intents := e.settle(keys, 20*time.Second)
	for _, k := range keys {
		require.Equal(t, ledger.Published, intents[k].State, k)
		require.Equal(t, ledger.ReasonReconciledFound, intents[k].Reason, k)
		require.Equal(t, "obj-"+k.String(), intents[k].ObjectID)
	}
	require.EqualValues(t, 2, lookups.Load(), "one lookup each")
}
