package cli

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/internal/role"
	"github.com/atmost/atmost/internal/serve"
	"github.com/atmost/atmost/pkg/ledger"
)

func consoleCommand() *Command {
	var listen, certFile, keyFile, tokenFile, natsURL, httpAddr string
	var idle time.Duration
	return &Command{Name: "console", Summary: "the operator console: a web page for what waits for a person, each operator logged in with their own token",
		About: `Serves the operator console until interrupted: the intents by state and reason, one intent's
whole story, the rejects and the controls, and the operators' actions (park, resolve, retry,
kill switches, policies, in bulk too, and reject replays), each previewed and confirmed, made
through the same ledger operations as atmost park, resolve, retry, switch, policy and rejects
replay, under the name of the operator whose token logged in (console:NAME in the history).
Each person logs in with the token atmost operators add gave them; a script sends it as
"Authorization: Bearer TOKEN" to the JSON API under /api/v1 (docs/console-api.yaml), which
reads and changes what the pages do, through the same code. A viewer sees every page and changes nothing; a revoked
operator's token stops working and its sessions end at once. $` + console.TokenVariable + ` (or
--token-file), when set, is a shared bootstrap token: it logs in as the built-in operator
bootstrap (console:bootstrap), to add the first operators from; it must be strong (at least
32 random characters: openssl rand -base64 32). Wrong tokens are throttled per client and in
all, and every login, refusal and change is logged on stderr. With a NATS server named, the
overview follows ATMOST_EVENTS live and an action's event (a replay's work items too) is
published right away.`,
		Flags: func(f *Flags) {
			f.String(&listen, "listen", "ADDR", console.DefaultListen, "the console's address")
			f.String(&certFile, "tls-cert", "FILE", "", "serve over TLS with this certificate (PEM; with --tls-key)")
			f.String(&keyFile, "tls-key", "FILE", "", "the TLS certificate's private key (PEM; with --tls-cert)")
			f.String(&tokenFile, "token-file", "FILE", "", "read the shared bootstrap token from this file instead of $"+console.TokenVariable)
			f.String(&natsURL, "nats-url", "URL", "", "a NATS server holding ATMOST_EVENTS, for live events and publishing right away (empty: neither)").Env("ATMOST_NATS_URL")
			f.Duration(&idle, "idle-timeout", "D", console.DefaultIdleTimeout, "end a session unused this long (a session ends 12h after its login in any case)")
			f.String(&httpAddr, "http", "ADDR", "", "serve /healthz, /readyz and Prometheus /metrics (the login metrics) here (empty: none)")
			f.Ledger("the ledger")
		},
		Run: func(ctx context.Context, c *line) int {
			return runConsole(ctx, c, consoleFlags{listen, certFile, keyFile, tokenFile, natsURL, httpAddr, idle})
		},
	}
}

type consoleFlags struct {
	listen, certFile, keyFile, tokenFile, natsURL, httpAddr string
	idle                                                    time.Duration
}

func runConsole(ctx context.Context, c *line, o consoleFlags) int {
	listen, certFile, keyFile, tokenFile, natsURL := o.listen, o.certFile, o.keyFile, o.tokenFile, o.natsURL
	token := setting(c.io.Env, console.TokenVariable, "")
	if tokenFile != "" {
		if token != "" {
			return c.usageError("--token-file and %s are both given: give one", console.TokenVariable)
		}
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return c.usageError("--token-file: %v", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return c.usageError("--token-file %s is empty", tokenFile)
		}
	}
	if err := console.CheckListen(listen); err != nil {
		return c.usageError("%v", err)
	}
	if token != "" {
		if err := console.CheckToken(token); err != nil {
			return c.usageError("%v", err)
		}
	}
	if o.idle <= 0 {
		return c.usageError("--idle-timeout must be positive")
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	if token != "" {
		c.note("%s logs in as the built-in operator %s (recorded as console:%s): add each person as an operator (atmost operators add NAME --role operator) and unset it",
			console.TokenVariable, ledger.BootstrapOperator, ledger.BootstrapOperator)
	} else if live, err := liveOperators(ctx, l); err != nil {
		return c.fail(err)
	} else if live == 0 {
		c.note("no operator can log in yet: add one with atmost operators add NAME --role operator (its token is printed once)")
	}
	log := role.Logger(c.io.Stderr)
	defer func() { _ = log.Sync() }()
	cfg := console.Config{Ledger: l, Token: token, Logger: log, IdleTimeout: o.idle}
	if o.httpAddr != "" {
		reg := serve.NewRegistry()
		cfg.Registerer = reg
		addr, err := serve.Listen(ctx, o.httpAddr, serve.Handler(reg, map[string]serve.Check{"ledger": func(ctx context.Context) error {
			_, err := l.CurrentEpoch(ctx)
			return err
		}}), log)
		if err != nil {
			return c.fail(err)
		}
		fmt.Fprintf(c.io.Stdout, "metrics: http://%s/metrics\n", addr)
	}
	if url := strings.TrimSpace(natsURL); url != "" {
		nc, err := connectNATS(url)
		if err != nil {
			return c.fail(err)
		}
		defer nc.Close()
		if cfg.JetStream, err = jetstream.New(nc); err != nil {
			return c.fail(err)
		}
	}
	running, err := console.Listen(ctx, cfg, listen, certFile, keyFile)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.io.Stdout, "console: %s\n", running.URL)
	if host, _, _ := net.SplitHostPort(listen); certFile == "" && !console.LoopbackHost(host) {
		c.note("serving off loopback without TLS: the tokens and the session cookie cross the network in the clear (give --tls-cert and --tls-key)")
	}
	if err := running.Wait(); err != nil {
		return c.fail(err)
	}
	return ExitOK
}

// liveOperators counts the operators whose token works.
func liveOperators(ctx context.Context, l *ledger.Ledger) (int, error) {
	ops, err := l.Operators(ctx)
	n := 0
	for _, op := range ops {
		if op.RevokedAt == nil {
			n++
		}
	}
	return n, err
}
