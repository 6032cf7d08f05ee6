// Package mcpserver is `atmost mcp`: a Model Context Protocol server, built on the official Go
// SDK (github.com/modelcontextprotocol/go-sdk), through which an agent publishes intents, reads
// and awaits their outcomes, and cancels them, for the accounts its configuration allows. It
// serves over stdio (an MCP host starts it as a local process; its scope is the accounts the
// command line names) and over streamable HTTP (each request carries a producer token, `atmost
// producers add`, and acts for that producer's accounts, as ingest's HTTP API does).
//
// Every tool goes through pkg/client, as any Go producer does: publish is client.Publish and,
// within a bound, client.Await; get_outcome is client.Status; await_outcome is client.Await;
// cancel is client.Cancel. So a tool call that an agent repeats after a timeout or a cut
// connection is a re-publication of the same intent: the delivery key is derived from its
// content, JetStream drops the copy inside its duplicate window and the ledger counts any later
// copy as a duplicate. The tool descriptions say so, since the agent is the one that retries.
package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// The defaults of the configuration's fields (the zero value of a field means its default).
const (
	// DefaultPublishWait bounds how long publish waits for the outcome after JetStream took the
	// intent: long enough for a healthy stack to send a post, short enough for an agent's tool
	// call timeout (hosts commonly allow 30 s or more).
	DefaultPublishWait = 10 * time.Second
	// DefaultMaxAwait bounds await_outcome's timeout: an agent that wants longer calls it again,
	// which costs nothing.
	DefaultMaxAwait = 60 * time.Second
	// DefaultSessionTimeout closes an HTTP session that made no request this long, so that
	// agents that vanish hold no memory.
	DefaultSessionTimeout = 30 * time.Minute
	// MaxRequestBytes bounds an HTTP request's body: an envelope is at most
	// identity.MaxEnvelopeBytes, and a tool call wraps one.
	MaxRequestBytes = 256 << 10
)

// Producers looks up the producer a bearer token names: *ledger.Ledger.
type Producers interface {
	ProducerByToken(ctx context.Context, token string) (ledger.Producer, error)
}

// Config configures a Server.
type Config struct {
	// Client publishes and reads outcomes; required.
	Client *client.Client
	// Accounts bounds the accounts the tools act for. Over stdio it is the whole scope, and
	// must not be empty. Over HTTP each request acts for its producer token's accounts, and
	// only for those of them among Accounts when Accounts is not empty.
	Accounts []string
	// Producers checks the bearer token of every HTTP request; required for HTTP.
	Producers Producers
	// Canceller is what the cancel tool calls; nil leaves the tool out (see Canceller).
	Canceller Canceller
	// PublishWait bounds how long publish waits for the outcome. Default DefaultPublishWait.
	PublishWait time.Duration
	// MaxAwait bounds await_outcome's timeout. Default DefaultMaxAwait.
	MaxAwait time.Duration
	// SessionTimeout is DefaultSessionTimeout for HTTP sessions.
	SessionTimeout time.Duration
	// Version is what the server reports as its implementation's version.
	Version string
	// Logger receives the SDK's log; nil logs nothing. Over stdio it must not write to stdout.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	c.PublishWait = cmp.Or(c.PublishWait, DefaultPublishWait)
	c.MaxAwait = cmp.Or(c.MaxAwait, DefaultMaxAwait)
	c.SessionTimeout = cmp.Or(c.SessionTimeout, DefaultSessionTimeout)
	c.Version = cmp.Or(c.Version, "dev")
	return c
}

// Server serves atmost's tools over stdio and streamable HTTP.
type Server struct {
	cfg Config
}

// New checks the configuration and returns the server.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if cfg.Client == nil {
		return nil, errors.New("mcp: no client")
	}
	if cfg.PublishWait < 0 || cfg.MaxAwait <= 0 || cfg.SessionTimeout < 0 {
		return nil, fmt.Errorf("mcp: configuration out of range: publish wait %s, max await %s, session timeout %s", cfg.PublishWait, cfg.MaxAwait, cfg.SessionTimeout)
	}
	for _, a := range cfg.Accounts {
		if err := identity.ValidateAccount(a); err != nil {
			return nil, fmt.Errorf("mcp: %w", err)
		}
	}
	return &Server{cfg: cfg}, nil
}

// Run serves one session over t (mcp.StdioTransport for a process an MCP host started) until
// the peer closes it or ctx ends. Its scope is Config.Accounts, which must not be empty: a
// local process has no token to say whose it is, so its command line says it.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	if len(s.cfg.Accounts) == 0 {
		return errors.New("mcp: over stdio, name the accounts the tools may act for (--account)")
	}
	accounts := s.cfg.Accounts
	return s.mcpServer(func(*mcp.CallToolRequest) ([]string, error) { return accounts, nil }).Run(ctx, t)
}

// Handler serves streamable HTTP. Every request must carry "Authorization: Bearer <producer
// token>" (401 otherwise; the token is checked on each request, so a revocation takes effect
// at once), and acts for the producer's accounts (among Config.Accounts when it is set).
func (s *Server) Handler() (http.Handler, error) {
	if s.cfg.Producers == nil {
		return nil, errors.New("mcp: over HTTP, a ledger checks the producer tokens")
	}
	srv := s.mcpServer(s.tokenScope)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		SessionTimeout: s.cfg.SessionTimeout, MaxRequestBodyBytes: MaxRequestBytes, Logger: s.cfg.Logger,
	})
	return auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h), nil
}

// Serve serves streamable HTTP on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	h, err := s.Handler()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	err = srv.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Path is where Serve answers MCP requests.
const Path = "/mcp"

// producerAccounts is the key of TokenInfo.Extra that holds the producer's accounts.
const producerAccounts = "accounts"

// verify is the bearer token check: the token must name a producer that is not revoked.
func (s *Server) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	p, err := s.cfg.Producers.ProducerByToken(ctx, token)
	switch {
	case errors.Is(err, ledger.ErrUnknownProducer):
		return nil, fmt.Errorf("%w: the token is no producer's, or its producer is revoked (atmost producers add)", auth.ErrInvalidToken)
	case err != nil:
		return nil, fmt.Errorf("the ledger could not be read; ask again: %w", err)
	}
	return &auth.TokenInfo{UserID: "producer:" + p.Name, Extra: map[string]any{producerAccounts: p.Accounts}}, nil
}

// tokenScope is the accounts an HTTP request may act for: its producer's, among
// Config.Accounts when that is set.
func (s *Server) tokenScope(req *mcp.CallToolRequest) ([]string, error) {
	var info *auth.TokenInfo
	if req.Extra != nil {
		info = req.Extra.TokenInfo
	}
	if info == nil {
		return nil, errors.New("no producer token came with the request")
	}
	accounts, _ := info.Extra[producerAccounts].([]string)
	if len(s.cfg.Accounts) == 0 {
		return accounts, nil
	}
	return slices.DeleteFunc(slices.Clone(accounts), func(a string) bool { return !slices.Contains(s.cfg.Accounts, a) }), nil
}

// scope says which accounts one tool call may act for.
type scope func(req *mcp.CallToolRequest) ([]string, error)

// errNotAllowed is a call for an account outside its scope.
var errNotAllowed = errors.New("this server may not act for that account")

// check returns nil when account is one the call may act for.
func (sc scope) check(req *mcp.CallToolRequest, account string) error {
	accounts, err := sc(req)
	if err != nil {
		return err
	}
	if !slices.Contains(accounts, account) {
		return fmt.Errorf("%w: %q (it may act for %q)", errNotAllowed, account, accounts)
	}
	return nil
}
