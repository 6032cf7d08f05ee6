package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/internal/dev"
	"github.com/atmost/atmost/internal/mcpserver"
	"github.com/atmost/atmost/internal/testkit/dbtest"
	"github.com/atmost/atmost/internal/tools/platformsim"
	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/events"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// stack is every atmost role (atmost dev's stack: a real ledger, an embedded JetStream), the
// platform simulator behind a gate that can hold its create requests, and a Go client on the
// stack's NATS, which the MCP servers of a test publish through.
type stack struct {
	t      *testing.T
	ctx    context.Context
	ledger *ledger.Ledger
	js     jetstream.JetStream
	client *client.Client
	sim    *platformsim.Server
	gate   *gate
}

// The accounts every stack has, on the simulator.
const (
	acct1 = "acct-1"
	acct2 = "acct-2"
)

func newStack(t *testing.T) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	db := dbtest.New(t)
	simSrv, err := platformsim.New(platformsim.Config{})
	require.NoError(t, err)
	g := &gate{next: simSrv.Handler(), arrived: make(chan struct{}, 16)}
	simHTTP := httptest.NewServer(g)
	t.Cleanup(simHTTP.Close)

	st, err := dev.Start(ctx, dev.Options{DatabaseURL: db.URL, HTTPAddrs: map[string]string{"ingest": "127.0.0.1:0", "dispatcher": "127.0.0.1:0",
		"sweeper": "127.0.0.1:0", "reconciler": "127.0.0.1:0"}, Logs: io.Discard})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Stop() })
	l, err := ledger.New(db.Pool, ledger.Config{Actor: "test"})
	require.NoError(t, err)
	for _, a := range []string{acct1, acct2} {
		require.NoError(t, l.AddAccount(ctx, ledger.Account{ID: a, Platform: sim.Name, Settings: json.RawMessage(fmt.Sprintf(`{"url":%q}`, simHTTP.URL))},
			ledger.Actor{Name: "test", Reason: "a test account"}))
	}
	nc, err := nats.Connect(st.NATSURL)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	c, err := client.New(nc, client.Config{PollInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the streams and the outcome service exist once ingest started
		_, err := js.Stream(ctx, events.IntentsStream)
		if err != nil {
			return false
		}
		_, err = c.Status(ctx, acct1, identity.DeliveryKey{})
		return !errors.Is(err, client.ErrNoStatusService)
	}, 30*time.Second, 50*time.Millisecond)
	return &stack{t: t, ctx: ctx, ledger: l, js: js, client: c, sim: simSrv, gate: g}
}

// server is an MCP server on the stack's client with cfg (Client set).
func (s *stack) server(cfg mcpserver.Config) *mcpserver.Server {
	s.t.Helper()
	cfg.Client = s.client
	srv, err := mcpserver.New(cfg)
	require.NoError(s.t, err)
	return srv
}

// intentsStored is how many messages ATMOST_INTENTS holds.
func (s *stack) intentsStored() uint64 {
	s.t.Helper()
	st, err := s.js.Stream(s.ctx, events.IntentsStream)
	require.NoError(s.t, err)
	info, err := st.Info(s.ctx)
	require.NoError(s.t, err)
	return info.State.Msgs
}

// keyOf is the delivery key of a post of text for account, as ingest computes it.
func keyOf(t *testing.T, account, text string) identity.DeliveryKey {
	t.Helper()
	env, err := client.Intent{Account: account, Action: "post", Request: map[string]any{"text": text}}.Envelope()
	require.NoError(t, err)
	return env.DeliveryKey()
}

// gate passes the platform's requests to the simulator, and while closed holds each create
// request (a POST) until it opens, telling arrived of each one it holds.
type gate struct {
	next    http.Handler
	arrived chan struct{}

	mu     sync.Mutex
	closed bool
	open   chan struct{}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	hold, open := g.closed && r.Method == http.MethodPost, g.open
	g.mu.Unlock()
	if hold {
		g.arrived <- struct{}{}
		<-open
	}
	g.next.ServeHTTP(w, r)
}

// Close makes the gate hold the create requests from now on.
func (g *gate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.open = true, make(chan struct{})
}

// Open lets the held requests and every later one through.
func (g *gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		g.closed = false
		close(g.open)
	}
}

// agent is an MCP client session, as an agent's host holds one.
type agent struct {
	t       *testing.T
	session *mcp.ClientSession
}

func connectAgent(t *testing.T, ctx context.Context, tr mcp.Transport) (*agent, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	session, err := c.Connect(ctx, tr, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = session.Close() })
	return &agent{t: t, session: session}, nil
}

// call calls a tool and returns its result; err is the session's (a protocol or transport
// error), not the tool's (IsError).
func (a *agent) call(ctx context.Context, tool string, args map[string]any) (*mcp.CallToolResult, error) {
	return a.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
}

// ok calls a tool, requires it to succeed, and decodes its structured result into out.
func (a *agent) ok(ctx context.Context, tool string, args map[string]any, out any) {
	a.t.Helper()
	res, err := a.call(ctx, tool, args)
	require.NoError(a.t, err)
	require.False(a.t, res.IsError, "%s: %s", tool, text(res))
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(a.t, err)
	require.NoError(a.t, json.Unmarshal(b, out))
}

// refused calls a tool and requires the tool to refuse; it returns the refusal's text.
func (a *agent) refused(ctx context.Context, tool string, args map[string]any) string {
	a.t.Helper()
	res, err := a.call(ctx, tool, args)
	require.NoError(a.t, err)
	require.True(a.t, res.IsError, "%s answered %s", tool, text(res))
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func post(account, text string) map[string]any {
	return map[string]any{"account": account, "action": "post", "request": map[string]any{"text": text}}
}

// pipes is an stdio session's two byte streams, which the test can cut as a host that dies
// (or kills its server) would.
type pipes struct {
	server, client *mcp.IOTransport
	closers        []interface{ CloseWithError(error) error }
}

func newPipes() *pipes {
	toServer, fromClient := io.Pipe()
	toClient, fromServer := io.Pipe()
	return &pipes{
		server:  &mcp.IOTransport{Reader: toServer, Writer: fromServer},
		client:  &mcp.IOTransport{Reader: toClient, Writer: fromClient},
		closers: []interface{ CloseWithError(error) error }{toServer, fromClient, toClient, fromServer},
	}
}

var errCut = errors.New("the connection was cut")

func (p *pipes) cut() {
	for _, c := range p.closers {
		_ = c.CloseWithError(errCut)
	}
}

// runStdio serves one stdio session of srv on p until it ends.
func runStdio(t *testing.T, ctx context.Context, srv *mcpserver.Server, p *pipes) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Run(ctx, p.server) }()
	t.Cleanup(func() { p.cut(); <-done })
}

// cuttable is an HTTP client whose connections the test can cut, each request carrying a
// bearer token.
type cuttable struct {
	token string
	base  http.RoundTripper
	mu    sync.Mutex
	conns []net.Conn
}

func newCuttable(token string) *cuttable {
	c := &cuttable{token: token}
	c.base = &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			c.mu.Lock()
			c.conns = append(c.conns, conn)
			c.mu.Unlock()
		}
		return conn, err
	}}
	return c
}

func (c *cuttable) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if c.token != "" {
		r.Header.Set("Authorization", "Bearer "+c.token)
	}
	return c.base.RoundTrip(r)
}

// cut closes every connection the client opened.
func (c *cuttable) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// serveHTTP serves srv's streamable HTTP on a loopback port until the test ends and returns
// its endpoint.
func serveHTTP(t *testing.T, ctx context.Context, srv *mcpserver.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	return "http://" + ln.Addr().String() + mcpserver.Path
}

func httpTransport(endpoint string, c *cuttable) *mcp.StreamableClientTransport {
	// No reconnection of a cut stream: the agent's host gives up on the call, as after a
	// timeout, and calls again.
	return &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: c}, MaxRetries: -1, DisableStandaloneSSE: true}
}

func timeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
