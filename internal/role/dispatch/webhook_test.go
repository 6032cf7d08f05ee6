package dispatch_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
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
	"github.com/atmost/atmost/pkg/platform/webhook"
)

// hookEndpoint is a real HTTP endpoint that creates an object for every POST to /hook and
// answers 201 naming it; it offers no read-back, so any GET is counted and answered 404.
type hookEndpoint struct {
	*httptest.Server
	posts, reads atomic.Int64
}

func newHookEndpoint(t *testing.T) *hookEndpoint {
	h := &hookEndpoint{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/hook" {
			n := h.posts.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":"obj-%d"}`, n)
			return
		}
		h.reads.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(h.Close)
	return h
}

// addWebhook stores a webhook account as the ledger takes it, without the check that
// `atmost accounts add` makes: as an account stored before that check existed.
func (e *env) addWebhook(id, settings string) {
	e.T.Helper()
	require.NoError(e.T, e.Ledger.AddAccount(e.Ctx, ledger.Account{ID: id, Platform: webhook.Name, Settings: json.RawMessage(settings)}, ledger.Actor{Name: "test", Reason: "a webhook account"}))
	unlimited := 0
	_, err := e.Ledger.SetPolicy(e.Ctx, id, ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "test", Reason: "tests not about the rate limit"})
	require.NoError(e.T, err)
}

// A webhook account that takes the response as proof ("confirm": "response") publishes each
// success naming its object, reads nothing back, and history says so: published_unread.
func TestAWebhookConfirmedByItsResponsePublishesUnread(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	hook := newHookEndpoint(t)
	e.addWebhook("hook-1", fmt.Sprintf(`{"url":%q,"confirm":"response"}`, hook.URL+"/hook"))
	cfg := e.config()
	cfg.Platforms = platform.Registry{webhook.Name: webhook.Open}
	e.run(cfg)

	keys := e.Submit("hook-1", worldtest.Texts("taken on its word", 3)...)
	intents := e.settle(keys, 20*time.Second)
	for _, in := range intents {
		require.Equal(t, ledger.Published, in.State, in.Key)
		require.Equal(t, ledger.ReasonPublishedUnread, in.Reason, in.Key)
		require.NotEmpty(t, in.ObjectID)
	}
	require.EqualValues(t, 3, hook.posts.Load(), "one send each")
	require.Zero(t, hook.reads.Load(), "nothing is read back")
	require.Equal(t, 3, e.Count(`SELECT count(*) FROM history WHERE to_state = 'published' AND reason = 'published_unread'`))
}

// An account stored before the check, a webhook that can confirm nothing, is not served: its
// intents wait pending, nothing sent and no attempt made, and the log names the three
// choices, once. Fixed settings release them.
func TestAStoredWebhookThatCanConfirmNothingIsHeldPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t, platformsim.Config{})
	hook := newHookEndpoint(t)
	e.addWebhook("hook-1", fmt.Sprintf(`{"url":%q}`, hook.URL+"/hook"))
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := e.config()
	cfg.Platforms = platform.Registry{webhook.Name: webhook.Open}
	cfg.GateDelay = 20 * time.Millisecond
	cfg.Logger = zap.New(core)
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, cfg)
	require.NoError(t, err)
	e.Run(d.Run)

	keys := e.Submit("hook-1", worldtest.Texts("nothing would confirm it", 2)...)
	require.Eventually(t, func() bool { return dispatch.WorkCount(d, "adapter_unavailable") >= 20 }, 20*time.Second, 10*time.Millisecond)
	for _, k := range keys {
		require.Equal(t, ledger.Pending, e.Intent(k).State)
	}
	require.Zero(t, e.Count(`SELECT count(*) FROM attempts`), "no attempt")
	require.Zero(t, hook.posts.Load()+hook.reads.Load(), "nothing sent")
	held := logs.FilterMessageSnippet("cannot open the account's platform adapter").All()
	require.Len(t, held, 1)
	why := fmt.Sprint(held[0].ContextMap()["error"])
	for _, choice := range []string{"nothing confirms a success", "readback_url", "status_url", `"confirm": "response"`} {
		require.Contains(t, why, choice)
	}

	_, err = e.Ledger.UpdateAccount(e.Ctx, "hook-1", ledger.AccountUpdate{
		Settings: json.RawMessage(fmt.Sprintf(`{"url":%q,"confirm":"response"}`, hook.URL+"/hook"))}, ledger.Actor{Name: "test", Reason: "say how a success is confirmed"})
	require.NoError(t, err)
	intents := e.settle(keys, 20*time.Second)
	require.Equal(t, map[ledger.State]int{ledger.Published: 2}, states(intents))
}
