package mcpserver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/mcpserver"
	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// An agent's publish is cut off while its post is on its way to the platform (the platform holds
// the request); the agent calls publish again with the same arguments on a new session, as a
// host does after a timeout, and gets the same intent: one request reaches the platform, one
// object is created, and the outcome names it. Over stdio the host starts the server again; over
// HTTP it opens a new session with the same producer token.
func TestAnAgentThatRetriesAfterACutConnectionSeesOnePost(t *testing.T) {
	st := newStack(t)
	ctx := timeout(t, 3*time.Minute)
	token, err := st.ledger.AddProducer(ctx, "agent-1", []string{acct1}, ledger.Actor{Name: "test", Reason: "an agent"})
	require.NoError(t, err)

	cases := []struct {
		name string
		// session opens an agent's session; cut cuts its connection.
		session func(t *testing.T) (a *agent, cut func())
	}{
		{name: "stdio", session: func(t *testing.T) (*agent, func()) {
			p := newPipes()
			runStdio(t, ctx, st.server(mcpserver.Config{Accounts: []string{acct1}}), p)
			a, err := connectAgent(t, ctx, p.client)
			require.NoError(t, err)
			return a, p.cut
		}},
		{name: "http", session: func() func(t *testing.T) (*agent, func()) {
			var endpoint string
			return func(t *testing.T) (*agent, func()) {
				if endpoint == "" {
					endpoint = serveHTTP(t, ctx, st.server(mcpserver.Config{Producers: st.ledger}))
				}
				c := newCuttable(token)
				a, err := connectAgent(t, ctx, httpTransport(endpoint, c))
				require.NoError(t, err)
				return a, c.cut
			}
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			text := "posted once over " + tc.name
			key := keyOf(t, acct1, text)
			st.gate.Close()
			defer st.gate.Open()

			first, cut := tc.session(t)
			called := make(chan error, 1)
			go func() {
				res, err := first.call(ctx, mcpserver.ToolPublish, post(acct1, text))
				if err == nil && res.IsError {
					err = errors.New(text)
				}
				called <- err
			}()
			<-st.gate.arrived // the post is on its way to the platform, which holds it
			cut()
			require.Error(t, <-called, "the agent got no answer")
			st.gate.Open()

			again, _ := tc.session(t)
			var out mcpserver.PublishOutput
			again.ok(ctx, mcpserver.ToolPublish, post(acct1, text), &out)
			require.Equal(t, key.String(), out.DeliveryKey, "the same arguments are the same intent")
			require.True(t, out.Duplicate, "JetStream dropped the copy")
			var o mcpserver.Outcome
			again.ok(ctx, mcpserver.ToolAwait, map[string]any{"account": acct1, "delivery_key": out.DeliveryKey}, &o)
			require.Equal(t, string(atmosttype.Published), o.State, "%+v", o)
			require.NotEmpty(t, o.ObjectID)
			require.Equal(t, 1, st.sim.Received(key.String()), "one request reached the platform")
			require.Equal(t, 1, st.sim.Created(key.String()), "one post")
			in, err := st.ledger.Get(ctx, key)
			require.NoError(t, err)
			require.Equal(t, 1, in.AttemptsAuthorized, "one attempt authorized")
		})
	}
}

// publish answers the key and, within its wait, the outcome; publishing the same arguments
// again is the same intent, a duplicate with the same outcome; get_outcome and await_outcome
// read it; wait_seconds 0 answers the key alone; an intent ingest would refuse is refused and
// nothing is stored.
func TestPublishAnswersTheKeyAndTheOutcomeAndTheSameIntentOnRepeat(t *testing.T) {
	st := newStack(t)
	ctx := timeout(t, 2*time.Minute)
	p := newPipes()
	runStdio(t, ctx, st.server(mcpserver.Config{Accounts: []string{acct1}, PublishWait: time.Minute}), p)
	a, err := connectAgent(t, ctx, p.client)
	require.NoError(t, err)

	key := keyOf(t, acct1, "hello from an agent")
	var first mcpserver.PublishOutput
	a.ok(ctx, mcpserver.ToolPublish, post(acct1, "hello from an agent"), &first)
	require.Equal(t, key.String(), first.DeliveryKey)
	require.False(t, first.Duplicate)
	require.Positive(t, first.Seq)
	require.NotNil(t, first.Outcome)
	require.True(t, first.Outcome.Settled)
	require.Equal(t, string(atmosttype.Published), first.Outcome.State)
	require.NotEmpty(t, first.Outcome.ObjectID)

	var again mcpserver.PublishOutput
	a.ok(ctx, mcpserver.ToolPublish, map[string]any{"account": acct1, "action": "post", "request": map[string]any{"text": "  hello from an agent \n"}}, &again)
	require.Equal(t, first.DeliveryKey, again.DeliveryKey, "the key is the canonical request's")
	require.True(t, again.Duplicate)
	require.Equal(t, first.Seq, again.Seq)
	require.Equal(t, first.Outcome.ObjectID, again.Outcome.ObjectID)

	var got, awaited mcpserver.Outcome
	a.ok(ctx, mcpserver.ToolGetOutcome, map[string]any{"account": acct1, "delivery_key": key.String()}, &got)
	require.Equal(t, first.Outcome.ObjectID, got.ObjectID)
	a.ok(ctx, mcpserver.ToolAwait, map[string]any{"account": acct1, "delivery_key": key.String(), "timeout_seconds": 5}, &awaited)
	require.Equal(t, got, awaited)
	require.Equal(t, 1, st.sim.Created(key.String()))

	var quick mcpserver.PublishOutput
	a.ok(ctx, mcpserver.ToolPublish, map[string]any{"account": acct1, "action": "post", "request": map[string]any{"text": "no wait"}, "wait_seconds": 0}, &quick)
	require.Equal(t, keyOf(t, acct1, "no wait").String(), quick.DeliveryKey)
	require.Nil(t, quick.Outcome, "no wait, no outcome")

	stored := st.intentsStored()
	msg := a.refused(ctx, mcpserver.ToolPublish, map[string]any{"account": acct1, "action": "Post", "request": map[string]any{"text": "x"}})
	require.Contains(t, msg, string(identity.ReasonInvalidAction))
	require.Contains(t, msg, "nothing was sent")
	require.Equal(t, stored, st.intentsStored(), "nothing was published")

	msg = a.refused(ctx, mcpserver.ToolGetOutcome, map[string]any{"account": acct1, "delivery_key": keyOf(t, acct1, "never published").String()})
	require.Contains(t, msg, "publish the same arguments again")
}

// Each call acts only for the accounts its configuration allows: over stdio the accounts named,
// over HTTP the producer token's (among the named ones, when any are). A call for another
// account is refused before anything is published or read, whatever exists; a request without
// a working token is refused at the door.
func TestTheToolsActOnlyForTheAccountsTheConfigurationAllows(t *testing.T) {
	st := newStack(t)
	ctx := timeout(t, 2*time.Minute)
	// An intent of acct-2 that exists: reading it is refused all the same.
	r, err := st.client.Publish(ctx, client.Intent{Account: acct2, Action: "post", Request: map[string]any{"text": "acct-2's own"}})
	require.NoError(t, err)
	_, err = st.client.Await(ctx, acct2, r.Key)
	require.NoError(t, err)
	other := map[string]any{"account": acct2, "delivery_key": r.Key.String()}

	refusesAcct2 := func(t *testing.T, a *agent) {
		t.Helper()
		stored := st.intentsStored()
		require.Contains(t, a.refused(ctx, mcpserver.ToolPublish, post(acct2, "not mine")), "may not act for")
		require.Equal(t, stored, st.intentsStored(), "nothing was published")
		require.Contains(t, a.refused(ctx, mcpserver.ToolGetOutcome, other), "may not act for")
		require.Contains(t, a.refused(ctx, mcpserver.ToolAwait, other), "may not act for")
	}

	t.Run("stdio", func(t *testing.T) {
		p := newPipes()
		runStdio(t, ctx, st.server(mcpserver.Config{Accounts: []string{acct1}}), p)
		a, err := connectAgent(t, ctx, p.client)
		require.NoError(t, err)
		refusesAcct2(t, a)
		var out mcpserver.PublishOutput
		a.ok(ctx, mcpserver.ToolPublish, post(acct1, "mine"), &out)
	})

	t.Run("http", func(t *testing.T) {
		token, err := st.ledger.AddProducer(ctx, "agent-1", []string{acct1}, ledger.Actor{Name: "test", Reason: "an agent"})
		require.NoError(t, err)
		endpoint := serveHTTP(t, ctx, st.server(mcpserver.Config{Producers: st.ledger}))
		a, err := connectAgent(t, ctx, httpTransport(endpoint, newCuttable(token)))
		require.NoError(t, err)
		refusesAcct2(t, a)
		var out mcpserver.PublishOutput
		a.ok(ctx, mcpserver.ToolPublish, post(acct1, "mine over http"), &out)

		// The server's accounts narrow the token's: acct-1 is the token's, not the server's.
		narrow := serveHTTP(t, ctx, st.server(mcpserver.Config{Producers: st.ledger, Accounts: []string{acct2}}))
		n, err := connectAgent(t, ctx, httpTransport(narrow, newCuttable(token)))
		require.NoError(t, err)
		stored := st.intentsStored()
		require.Contains(t, n.refused(ctx, mcpserver.ToolPublish, post(acct1, "narrowed")), "may not act for")
		require.Contains(t, n.refused(ctx, mcpserver.ToolPublish, post(acct2, "narrowed")), "may not act for")
		require.Equal(t, stored, st.intentsStored())

		for name, tok := range map[string]string{"no token": "", "a wrong token": token + "x", "another kind of token": "atmost_op_x"} {
			_, err := connectAgent(t, ctx, httpTransport(endpoint, newCuttable(tok)))
			require.Error(t, err, name)
			require.Equal(t, http.StatusUnauthorized, initialize(t, endpoint, tok), name)
		}
		// A revoked producer's token stops working at its next request, in an open session too.
		_, err = st.ledger.RevokeProducer(ctx, "agent-1", ledger.Actor{Name: "test", Reason: "gone"})
		require.NoError(t, err)
		_, err = a.call(ctx, mcpserver.ToolPublish, post(acct1, "after the revocation"))
		require.Error(t, err)
		require.Equal(t, stored, st.intentsStored())
		_, err = connectAgent(t, ctx, httpTransport(endpoint, newCuttable(token)))
		require.Error(t, err)
		require.Equal(t, http.StatusUnauthorized, initialize(t, endpoint, token), "a revoked token is unauthorized, not an error to retry")
	})
}

// initialize posts an MCP initialize request with token (none when empty) as a host's first
// request, and returns the HTTP status.
func initialize(t *testing.T, endpoint, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// fakeCanceller answers every cancel with result, counting the calls.
type fakeCanceller struct {
	calls  atomic.Int32
	result func(account string, key identity.DeliveryKey) mcpserver.CancelResult
}

func (f *fakeCanceller) Cancel(_ context.Context, account string, key identity.DeliveryKey) (mcpserver.CancelResult, error) {
	f.calls.Add(1)
	return f.result(account, key), nil
}

// The cancel tool is listed only when the server has a Canceller; it asks it for the accounts
// the call may act for only, and answers cancelled or too late with the state.
func TestTheCancelToolAsksTheCancellerForItsAccountsOnly(t *testing.T) {
	st := newStack(t)
	ctx := timeout(t, 2*time.Minute)
	names := func(a *agent) []string {
		res, err := a.session.ListTools(ctx, nil)
		require.NoError(t, err)
		var out []string
		for _, tool := range res.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	p := newPipes()
	runStdio(t, ctx, st.server(mcpserver.Config{Accounts: []string{acct1}}), p)
	without, err := connectAgent(t, ctx, p.client)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{mcpserver.ToolPublish, mcpserver.ToolGetOutcome, mcpserver.ToolAwait}, names(without))

	f := &fakeCanceller{result: func(account string, key identity.DeliveryKey) mcpserver.CancelResult {
		return mcpserver.CancelResult{Key: key, Account: account, Cancelled: false, State: atmosttype.Authorized, Seq: 3}
	}}
	p = newPipes()
	runStdio(t, ctx, st.server(mcpserver.Config{Accounts: []string{acct1}, Canceller: f}), p)
	a, err := connectAgent(t, ctx, p.client)
	require.NoError(t, err)
	require.Contains(t, names(a), mcpserver.ToolCancel)

	key := keyOf(t, acct2, "someone else's")
	require.Contains(t, a.refused(ctx, mcpserver.ToolCancel, map[string]any{"account": acct2, "delivery_key": key.String()}), "may not act for")
	require.Zero(t, f.calls.Load(), "the canceller was not asked")

	var out mcpserver.CancelOutput
	key = keyOf(t, acct1, "mine")
	a.ok(ctx, mcpserver.ToolCancel, map[string]any{"account": acct1, "delivery_key": key.String()}, &out)
	require.Equal(t, mcpserver.CancelOutput{DeliveryKey: key.String(), Account: acct1, Cancelled: false, State: "authorized", Seq: 3}, out)
	require.EqualValues(t, 1, f.calls.Load())
	require.Contains(t, a.refused(ctx, mcpserver.ToolCancel, map[string]any{"account": acct1, "delivery_key": "dk1:nope"}), "delivery_key")
}

// The tools tell the agent what it must know to retry: publish is idempotent, and its
// description says why (the content-derived key) and what would be a second post (a new
// occurrence).
func TestTheToolDescriptionsSayARetryIsTheSameIntent(t *testing.T) {
	st := newStack(t)
	ctx := timeout(t, time.Minute)
	p := newPipes()
	runStdio(t, ctx, st.server(mcpserver.Config{Accounts: []string{acct1}}), p)
	a, err := connectAgent(t, ctx, p.client)
	require.NoError(t, err)
	res, err := a.session.ListTools(ctx, nil)
	require.NoError(t, err)
	tools := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
	}
	pub := tools[mcpserver.ToolPublish]
	require.NotNil(t, pub)
	for _, want := range []string{"same arguments", "at most once", "delivery key", "SHA-256", "occurrence", "timeout"} {
		require.Contains(t, pub.Description, want)
	}
	require.True(t, pub.Annotations.IdempotentHint)
	require.True(t, tools[mcpserver.ToolGetOutcome].Annotations.ReadOnlyHint)
	require.Contains(t, a.session.InitializeResult().Instructions, "same arguments")
}

// The cancel tool on the command's own Canceller, the client, against the stack: an intent
// that waits for its not_before is parked cancelled and never reaches the platform, a second
// cancel answers the same, and a published intent is too late.
func TestTheCancelToolParksAnIntentNotYetAuthorized(t *testing.T) {
	st := newStack(t)
	ctx := timeout(t, 2*time.Minute)
	p := newPipes()
	runStdio(t, ctx, st.server(mcpserver.Config{Accounts: []string{acct1}, Canceller: st.client}), p)
	a, err := connectAgent(t, ctx, p.client)
	require.NoError(t, err)

	waiting := client.Intent{Account: acct1, Action: "post", Request: map[string]any{"text": "not before an hour from now"},
		NotBefore: time.Now().Add(time.Hour)}
	r, err := st.client.Publish(ctx, waiting)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := st.client.Status(ctx, acct1, r.Key); return err == nil }, time.Minute, 50*time.Millisecond,
		"ingest never stored the intent")
	for range 2 {
		var out mcpserver.CancelOutput
		a.ok(ctx, mcpserver.ToolCancel, map[string]any{"account": acct1, "delivery_key": r.Key.String()}, &out)
		require.True(t, out.Cancelled, "%+v", out)
		require.Equal(t, "parked", out.State)
		require.Equal(t, "cancelled", out.Reason)
	}

	var pub mcpserver.PublishOutput
	a.ok(ctx, mcpserver.ToolPublish, map[string]any{"account": acct1, "action": "post", "request": map[string]any{"text": "sent before the cancel"}}, &pub)
	require.Equal(t, "published", pub.Outcome.State, "%+v", pub)
	var late mcpserver.CancelOutput
	a.ok(ctx, mcpserver.ToolCancel, map[string]any{"account": acct1, "delivery_key": pub.DeliveryKey}, &late)
	require.False(t, late.Cancelled)
	require.Equal(t, "published", late.State)
	require.Equal(t, 1, st.sim.Counts().Requests, "only the published intent reached the platform")
}
