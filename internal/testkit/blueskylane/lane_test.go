package blueskylane_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/testkit/blueskylane"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/testkit/worldtest"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/bluesky"
)

// account is the ledger account every lane test configures on its PDS.
const account = "acct-bsky"

// reconcileDelay is the account's reconcile_delay: short, the PDS is on loopback.
const reconcileDelay = time.Second

// lane is one test's world: a real PDS behind a Proxy, a migrated ledger, an embedded
// JetStream with atmost's streams, and the account "acct-bsky" configured on the PDS (through
// the proxy) with the app password behind an env: credential reference.
type lane struct {
	*worldtest.World
	pds     *blueskylane.PDS
	proxy   *blueskylane.Proxy
	account ledger.Account
}

var credentials atomic.Int64

func newLane(t *testing.T) *lane {
	t.Helper()
	return newLaneWith(t, nil)
}

// newLaneWith is newLane with settings added to the account's (the media settings).
func newLaneWith(t *testing.T, extra map[string]any) *lane {
	t.Helper()
	dbtest.SkipInShortLane(t, "it starts a PDS")
	pds := blueskylane.Start(t)
	u, err := url.Parse(pds.URL)
	require.NoError(t, err)
	proxy := blueskylane.NewProxy(t, u.Host)
	w := worldtest.New(t)
	ctx, l := w.Ctx, w.Ledger

	// The app password reaches the adapter the way an operator's does: a credential reference.
	// os.Setenv, not t.Setenv: the tests run in parallel, each with its own variable.
	secret := fmt.Sprintf("ATMOST_TEST_BLUESKY_APP_PASSWORD_%d_%d", os.Getpid(), credentials.Add(1))
	require.NoError(t, os.Setenv(secret, pds.Password))
	t.Cleanup(func() { _ = os.Unsetenv(secret) })
	fields := map[string]any{"pds": proxy.URL(), "identifier": pds.DID, "reconcile_delay": reconcileDelay.String()}
	maps.Copy(fields, extra)
	settings, err := json.Marshal(fields)
	require.NoError(t, err)
	acct := ledger.Account{ID: account, Platform: bluesky.Name, Settings: settings, CredentialRef: "env:" + secret, CredentialVersion: 1}
	require.NoError(t, l.AddAccount(ctx, acct, ledger.Actor{Name: "test", Reason: "a test account"}))
	unlimited := 0
	_, err = l.SetPolicy(ctx, account, ledger.PolicyEdit{Set: ledger.PolicyOverride{RatePerMinute: &unlimited}}, ledger.Actor{Name: "test", Reason: "the lane is not about the rate limit"})
	require.NoError(t, err)
	return &lane{World: w, pds: pds, proxy: proxy, account: acct}
}

// adapter opens the adapter the lane's account is configured with, as the roles do.
func (e *lane) adapter() platform.Adapter {
	e.T.Helper()
	ad, err := registry.Open(platform.Account{ID: e.account.ID, Platform: e.account.Platform, Settings: e.account.Settings,
		CredentialRef: e.account.CredentialRef, CredentialVersion: e.account.CredentialVersion})
	require.NoError(e.T, err)
	return ad
}

var registry = platform.Registry{bluesky.Name: bluesky.Open}

// dispatcher runs a dispatcher with the real adapter until the test ends.
func (e *lane) dispatcher() {
	e.T.Helper()
	d, err := dispatch.New(e.Ctx, e.JS, e.Ledger, e.Relay, dispatch.Config{
		Platforms: registry, Batch: 8, Concurrency: 8,
		ClaimLease: ledger.MinLease, InFlightLease: 3 * ledger.MinLease,
		SendTimeout: 5 * time.Second, ReadBackTimeout: 5 * time.Second, Margin: time.Second,
		GateDelay: 200 * time.Millisecond, AckWait: 5 * time.Second,
	})
	require.NoError(e.T, err)
	e.Run(d.Run)
}

// reconciler runs a reconciler (its own ledger actor) with the real adapter until the test ends.
func (e *lane) reconciler() {
	e.T.Helper()
	l, err := ledger.New(e.DB.AppPool(e.T), ledger.Config{Actor: "reconciler"})
	require.NoError(e.T, err)
	r, err := reconcile.New(e.Ctx, e.JS, l, relay.New(l, e.JS, relay.Config{}), reconcile.Config{
		Platforms: registry, Concurrency: 4, LookupTimeout: 5 * time.Second, ReadBackTimeout: 5 * time.Second,
		ScanInterval: 200 * time.Millisecond, RetryDelay: 200 * time.Millisecond, AckWait: 5 * time.Second,
	})
	require.NoError(e.T, err)
	e.Run(r.Run)
}

// submit stores intents and relays their work, as ingest does. Each envelope's account is the
// lane's.
func (e *lane) submit(envelopes ...string) []identity.DeliveryKey {
	e.T.Helper()
	var envs []identity.Envelope
	for _, raw := range envelopes {
		env, err := identity.ParseEnvelope([]byte(raw))
		require.NoError(e.T, err, raw)
		envs = append(envs, env)
	}
	results, err := e.Ledger.Submit(e.Ctx, envs)
	require.NoError(e.T, err)
	keys := make([]identity.DeliveryKey, len(results))
	for i, r := range results {
		require.Equal(e.T, ledger.Created, r.Outcome, envelopes[i])
		keys[i] = r.Key
	}
	_, err = e.Relay.Drain(e.Ctx)
	require.NoError(e.T, err)
	return keys
}

// envelope is an intent of the lane's account.
func envelope(action, target string, request any) string {
	req, err := json.Marshal(request)
	if err != nil {
		panic(err)
	}
	out, err := json.Marshal(map[string]any{"v": 1, "account": account, "action": action, "target": target, "request": json.RawMessage(req)})
	if err != nil {
		panic(err)
	}
	return string(out)
}

// await waits until every key is in one of the states, and returns the intents.
func (e *lane) await(keys []identity.DeliveryKey, within time.Duration, states ...ledger.State) map[identity.DeliveryKey]ledger.Intent {
	e.T.Helper()
	deadline := time.Now().Add(within)
	for {
		intents, err := e.Ledger.GetMany(e.Ctx, keys)
		require.NoError(e.T, err)
		waiting := []string{}
		for _, k := range keys {
			in := intents[k]
			ok := false
			for _, s := range states {
				ok = ok || in.State == s
			}
			if !ok {
				waiting = append(waiting, fmt.Sprintf("%s %s (%s)", in.Action, in.State, in.Reason))
			}
		}
		if len(waiting) == 0 {
			return intents
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("after %s, not yet %v: %s", within, states, strings.Join(waiting, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// record is a record as the PDS answers for it (com.atproto.repo.getRecord, listRecords).
type record struct {
	URI   string         `json:"uri"`
	CID   string         `json:"cid"`
	Value map[string]any `json:"value"`
}

// ref is a com.atproto.repo.strongRef.
func (r record) ref() map[string]string { return map[string]string{"uri": r.URI, "cid": r.CID} }

// xrpc calls a query of the PDS directly, not through the proxy nor the adapter.
func (e *lane) xrpc(method string, params url.Values, out any) (status int) {
	e.T.Helper()
	req, err := http.NewRequestWithContext(e.Ctx, http.MethodGet, e.pds.URL+"/xrpc/"+method+"?"+params.Encode(), nil)
	require.NoError(e.T, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.T, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		require.NoError(e.T, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// getRecord reads the record the adapter creates for key: the PDS's word, not the ledger's.
func (e *lane) getRecord(collection string, key identity.DeliveryKey) (record, bool) {
	e.T.Helper()
	var r record
	status := e.xrpc("com.atproto.repo.getRecord", url.Values{"repo": {e.pds.DID}, "collection": {collection}, "rkey": {bluesky.RecordKey(key)}}, &r)
	if status == http.StatusBadRequest {
		return record{}, false
	}
	require.Equal(e.T, http.StatusOK, status, "getRecord %s %s", collection, key)
	return r, true
}

// deleteRecord deletes a record of the lane account's repository the way a person does in an
// app: a session of the account, then com.atproto.repo.deleteRecord, directly on the PDS.
func (e *lane) deleteRecord(collection, rkey string) {
	e.T.Helper()
	call := func(method, bearer string, in, out any) {
		body, err := json.Marshal(in)
		require.NoError(e.T, err)
		req, err := http.NewRequestWithContext(e.Ctx, http.MethodPost, e.pds.URL+"/xrpc/"+method, strings.NewReader(string(body)))
		require.NoError(e.T, err)
		req.Header.Set("Content-Type", "application/json")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(e.T, err)
		defer resp.Body.Close()
		require.Equal(e.T, http.StatusOK, resp.StatusCode, method)
		if out != nil {
			require.NoError(e.T, json.NewDecoder(resp.Body).Decode(out))
		}
	}
	var sess struct {
		AccessJwt string `json:"accessJwt"`
	}
	call("com.atproto.server.createSession", "", map[string]string{"identifier": e.pds.DID, "password": e.pds.Password}, &sess)
	require.NotEmpty(e.T, sess.AccessJwt)
	call("com.atproto.repo.deleteRecord", sess.AccessJwt, map[string]string{"repo": e.pds.DID, "collection": collection, "rkey": rkey}, nil)
}

// listRecords is every record of a collection in the lane account's repository.
func (e *lane) listRecords(collection string) []record {
	e.T.Helper()
	var out struct {
		Records []record `json:"records"`
	}
	require.Equal(e.T, http.StatusOK, e.xrpc("com.atproto.repo.listRecords", url.Values{"repo": {e.pds.DID}, "collection": {collection}, "limit": {"100"}}, &out))
	return out.Records
}

// republish publishes an intent's work item again under another message id, as a sweeper's
// republish of stranded work or a redelivery would.
func (e *lane) republish(key identity.DeliveryKey) {
	e.T.Helper()
	w := events.WorkItem{V: events.Version, DeliveryKey: key, Account: account, Event: events.NewID(key, 1)}
	data, err := json.Marshal(w)
	require.NoError(e.T, err)
	_, err = e.JS.PublishMsg(e.Ctx, &nats.Msg{Subject: w.Subject(), Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{w.MsgID() + ":again"}}})
	require.NoError(e.T, err)
}

// drained waits until the dispatcher's consumer has nothing pending and nothing unacknowledged.
func (e *lane) drained() {
	e.T.Helper()
	c, err := e.JS.Consumer(e.Ctx, events.DispatchStream, "dispatcher")
	require.NoError(e.T, err)
	require.Eventually(e.T, func() bool {
		info, err := c.Info(e.Ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0
	}, 30*time.Second, 50*time.Millisecond, "the work queue never drained")
}

// lastTransition is the intent's latest history row.
func (e *lane) lastTransition(key identity.DeliveryKey) ledger.Transition {
	e.T.Helper()
	rec, err := e.Ledger.Inspect(e.Ctx, key)
	require.NoError(e.T, err)
	require.NotEmpty(e.T, rec.Transitions)
	return rec.Transitions[len(rec.Transitions)-1]
}
