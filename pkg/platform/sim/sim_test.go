package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

func TestOpenAppliesTheDefaults(t *testing.T) {
	t.Parallel()
	a, err := platform.Registry{Name: Open}.Open(platform.Account{ID: account, Platform: Name,
		Settings: json.RawMessage(`{"url":"http://127.0.0.1:9300/"}`)})
	require.NoError(t, err)
	require.Equal(t, platform.Capabilities{StatusLookup: false, DefinitiveStatuses: transport.DefaultDefinitive(),
		ContractVersion: "sim/v1", ReconcileDelay: 2 * time.Second, UnavailableStatuses: []int{429}, AuthStatuses: []int{401, 403}}, a.Capabilities())
	require.Equal(t, "http://127.0.0.1:9300", a.(*adapter).base, "a trailing slash is dropped")

	caps := a.Capabilities()
	caps.DefinitiveStatuses[0] = 200
	require.Equal(t, transport.DefaultDefinitive(), a.Capabilities().DefinitiveStatuses, "capabilities are fixed for the adapter's life")
}

func TestOpenReadsEverySetting(t *testing.T) {
	t.Parallel()
	a, err := Open(platform.Account{ID: account, Platform: Name, Settings: json.RawMessage(
		`{"url":"https://sim.example:8443/base","status_lookup":true,"reconcile_delay":"150ms","contract_version":"sim/v2"}`)})
	require.NoError(t, err)
	require.Equal(t, platform.Capabilities{StatusLookup: true, DefinitiveStatuses: transport.DefaultDefinitive(),
		ContractVersion: "sim/v2", ReconcileDelay: 150 * time.Millisecond, UnavailableStatuses: []int{429}, AuthStatuses: []int{401, 403}}, a.Capabilities())
	require.Equal(t, "https://sim.example:8443/base", a.(*adapter).base)
}

func TestOpenRefusesBadSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ id, settings, want string }{
		{account, ``, "url is required"},
		{account, `{}`, "url is required"},
		{account, `{"url":"ftp://x"}`, "the scheme must be http or https"},
		{account, `{"url":"http://"}`, "no host"},
		{account, `{"url":"http://h/?q=1"}`, "no user, query or fragment"},
		{account, `{"url":"http://u:p@h"}`, "no user, query or fragment"},
		{account, `{"url":"http://h","statuslookup":true}`, `unknown field "statuslookup"`},
		{account, `{"url":"http://h","reconcile_delay":"soon"}`, `reconcile_delay "soon"`},
		{account, `{"url":"http://h","reconcile_delay":"-1s"}`, `reconcile_delay "-1s"`},
		{account, `{"url":"http://h","reconcile_delay":"0s"}`, `reconcile_delay "0s": must be a positive duration`},
		{account, `{"url":"http://h","status_lookup":"yes"}`, "cannot unmarshal string"},
		{account, `{"url":"http://h"} {}`, "data after the settings object"},
		{"", `{"url":"http://h"}`, "the account has no id"},
	} {
		_, err := Open(platform.Account{ID: c.id, Platform: Name, Settings: json.RawMessage(c.settings)})
		require.ErrorIs(t, err, ErrInvalidSettings, c.settings)
		require.ErrorContains(t, err, c.want, c.settings)
	}
}

func TestPrepareIsDeterministicAndCarriesTheDeliveryKey(t *testing.T) {
	t.Parallel()
	a, err := Open(platform.Account{ID: "acct/one two", Platform: Name, Settings: json.RawMessage(`{"url":"http://sim:9300"}`)})
	require.NoError(t, err)
	e, err := identity.NewEnvelope("acct/one two", "reply", "post/7", []byte(`{"text":"Hi <there>","in_reply_to":"7"}`), "", nil)
	require.NoError(t, err)
	r := platform.Request{Key: e.DeliveryKey(), Account: e.Account, Action: e.Action, Target: e.Target, Request: e.Request, Text: "Hi <there>"}

	p, err := a.Prepare(r)
	require.NoError(t, err)
	again, err := a.Prepare(r)
	require.NoError(t, err)
	require.Equal(t, p, again)

	require.Equal(t, http.MethodPost, p.Method)
	require.Equal(t, "http://sim:9300/v1/accounts/acct%2Fone%20two/reply", p.URL)
	require.Equal(t, map[string][]string{"Content-Type": {"application/json"}, "Idempotency-Key": {r.Key.String()}}, p.Header)
	require.Equal(t, `{"action":"reply","request":{"in_reply_to":"7","text":"Hi <there>"},"target":"post/7","text":"Hi <there>"}`, string(p.Body))
	canonical, err := identity.CanonicalJSON(p.Body)
	require.NoError(t, err)
	require.Equal(t, canonical, p.Body, "the body is canonical JSON")
	require.Equal(t, platform.NewPrepared(r, p.Method, p.URL, p.Header, p.Body).Hash, p.Hash)
	require.Equal(t, r, p.Request)

	other := r
	other.Text = "Hi there"
	q, err := a.Prepare(other)
	require.NoError(t, err)
	require.NotEqual(t, p.Hash, q.Hash)
	require.False(t, bytes.Equal(p.Body, q.Body))
}

func TestPrepareRefusesWhatCannotBeSent(t *testing.T) {
	t.Parallel()
	a := open(t, "http://sim:9300", nil)
	good := request(t, "x")
	for _, c := range []struct {
		name string
		edit func(*platform.Request)
		want string
	}{
		{"no delivery key", func(r *platform.Request) { r.Key = identity.DeliveryKey{} }, "no delivery key"},
		{"another account", func(r *platform.Request) { r.Account = "acct-7" }, "another account"},
		{"no action", func(r *platform.Request) { r.Action = "" }, "no action"},
		{"request not an object", func(r *platform.Request) { r.Request = json.RawMessage(`["x"]`) }, "request projection"},
		{"request missing", func(r *platform.Request) { r.Request = nil }, "request projection"},
	} {
		r := good
		c.edit(&r)
		_, err := a.Prepare(r)
		require.ErrorContains(t, err, c.want, c.name)
	}
	_, err := a.Prepare(platform.Request{Key: good.Key, Account: "acct-7", Action: "post", Request: good.Request})
	require.ErrorIs(t, err, ErrWrongAccount)
}
