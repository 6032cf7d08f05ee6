package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/internal/mcpserver"
	"github.com/atmost/atmost/internal/natsconn"
	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/internal/version"
	"github.com/atmost/atmost/pkg/client"
)

type mcpFlags struct {
	accounts                             []string
	httpAddr, natsURL, certFile, keyFile string
	publishWait, maxAwait                time.Duration
}

func mcpCommand() *Command {
	var o mcpFlags
	return &Command{Name: "mcp", Summary: "a Model Context Protocol server: agents publish intents, read, await and cancel them, over stdio or HTTP",
		About: `Serves atmost's tools to AI agents over the Model Context Protocol: publish (an intent, at most
once: it returns the delivery key and, within --publish-wait, the outcome), get_outcome,
await_outcome (at most --max-await) and, where the stack serves cancels, cancel. Every tool goes
through the Go client: the intents go to ingest on NATS like any producer's.

Without --http it speaks MCP on its standard input and output, for an MCP host that starts it as
a local process, and acts for the accounts named with --account (required). With --http it
serves streamable HTTP on ADDR at /mcp; each request carries a producer token (atmost producers
add) as "Authorization: Bearer TOKEN", checked in the ledger on every request, and acts for that
producer's accounts (only those also named with --account, when any is).

An agent that calls publish again with the same arguments (after a timeout, a cut connection, an
error) names the same intent, whose delivery key is derived from its content: it is sent at most
once. The tool descriptions tell the agent so. docs/producers.md#agents-mcp has a host's
configuration.`,
		Flags: func(f *Flags) {
			f.Strings(&o.accounts, "account", "A", "an account the tools may act for (required over stdio; over HTTP it narrows each producer's accounts)")
			f.String(&o.httpAddr, "http", "ADDR", "", "serve streamable HTTP on this address instead of stdio (e.g. 127.0.0.1:8090)")
			f.String(&o.natsURL, "nats-url", "URL", DefaultNATSURL, "the NATS server atmost's roles use").Env("ATMOST_NATS_URL")
			f.Duration(&o.publishWait, "publish-wait", "D", mcpserver.DefaultPublishWait, "how long publish waits for the outcome at most (0: it returns the key alone)")
			f.Duration(&o.maxAwait, "max-await", "D", mcpserver.DefaultMaxAwait, "the longest await_outcome waits")
			f.String(&o.certFile, "tls-cert", "FILE", "", "with --http, serve over TLS with this certificate (PEM; with --tls-key)")
			f.String(&o.keyFile, "tls-key", "FILE", "", "the TLS certificate's private key (PEM; with --tls-cert)")
			f.Ledger("the ledger that checks the producer tokens (with --http only)")
		},
		Run: func(ctx context.Context, c *line) int { return runMCP(ctx, c, o) },
	}
}

func runMCP(ctx context.Context, c *line, o mcpFlags) int {
	o.httpAddr = strings.TrimSpace(o.httpAddr)
	switch {
	case o.httpAddr == "" && len(o.accounts) == 0:
		return c.usageError("over stdio, name the accounts the tools may act for with --account (repeat it for more)")
	case o.httpAddr == "" && (o.certFile != "" || o.keyFile != ""):
		return c.usageError("--tls-cert and --tls-key go with --http")
	case (o.certFile == "") != (o.keyFile == ""):
		return c.usageError("give --tls-cert and --tls-key together")
	case o.publishWait < 0 || o.maxAwait <= 0:
		return c.usageError("--publish-wait must be 0 or more and --max-await positive")
	}
	// Over stdio, standard output is the protocol's: everything else goes to standard error.
	log := role.Logger(c.io.Stderr).Named("mcp")
	defer func() { _ = log.Sync() }()
	nc, err := natsconn.Connect(ctx, "mcp", o.natsURL, log)
	if err != nil {
		return c.fail(err)
	}
	defer nc.Close()
	cl, err := client.New(nc, client.Config{})
	if err != nil {
		return c.fail(err)
	}
	cfg := mcpserver.Config{Client: cl, Canceller: cl, Accounts: o.accounts, PublishWait: o.publishWait, MaxAwait: o.maxAwait,
		Version: version.String(),
		// The SDK logs through slog: its warnings, as JSON lines beside the role's.
		Logger: slog.New(slog.NewJSONHandler(c.io.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("logger", "mcp.sdk")}
	if o.httpAddr == "" {
		s, err := mcpserver.New(cfg)
		if err != nil {
			return c.usageError("%v", err)
		}
		if err := s.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
			return c.fail(err)
		}
		return ExitOK
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	cfg.Producers = l
	s, err := mcpserver.New(cfg)
	if err != nil {
		return c.usageError("%v", err)
	}
	ln, err := net.Listen("tcp", o.httpAddr)
	if err != nil {
		return c.fail(fmt.Errorf("--http: %w", err))
	}
	scheme := "http"
	if o.certFile != "" {
		cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			_ = ln.Close()
			return c.usageError("--tls-cert/--tls-key: %v", err)
		}
		ln, scheme = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}), "https"
	}
	fmt.Fprintf(c.io.Stdout, "mcp: %s://%s%s\n", scheme, ln.Addr(), mcpserver.Path)
	if host, _, _ := net.SplitHostPort(o.httpAddr); scheme == "http" && !console.LoopbackHost(host) {
		c.note("serving off loopback without TLS: the producer tokens cross the network in the clear (give --tls-cert and --tls-key)")
	}
	if err := s.Serve(ctx, ln); err != nil {
		return c.fail(err)
	}
	return ExitOK
}
