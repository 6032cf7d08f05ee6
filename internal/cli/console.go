package cli

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/console"
)

func init() {
	commands["console"] = command{"the operator console: a web page for what waits for a person (needs " + console.TokenVariable + " off loopback)", runConsole}
}

const consoleUsage = `Usage: atmost console [flags]

Serves the operator console until interrupted: the intents by state and reason, one intent's
whole story, the rejects and the controls, and the operators' actions (park, resolve, retry,
kill switches, policies, in bulk too), each previewed and confirmed, made through the same
ledger operations as atmost park, resolve, retry, switch and policy, under the login's name.
A person logs in with a name and the token (` + console.TokenVariable + `, or --token-file); a script sends
"Authorization: Bearer TOKEN". Without a token it serves loopback addresses only. With a NATS
server named, the overview follows ATMOST_EVENTS live and an action's event is published right
away.

Flags:
`

func runConsole(ctx context.Context, io IO, args []string) int {
	fs := flag.NewFlagSet("atmost console", flag.ContinueOnError)
	fs.SetOutput(io.Stderr)
	listen := fs.String("listen", console.DefaultListen, "the console's address; without a token only a loopback address is served")
	certFile := fs.String("tls-cert", "", "serve over TLS with this certificate (PEM; with --tls-key)")
	keyFile := fs.String("tls-key", "", "the TLS certificate's private key (PEM; with --tls-cert)")
	tokenFile := fs.String("token-file", "", "read the token from this file instead of $"+console.TokenVariable)
	databaseURL := fs.String("database-url", setting(io.Env, "ATMOST_DATABASE_URL", DefaultDatabaseURL), "the ledger (env ATMOST_DATABASE_URL)")
	natsURL := fs.String("nats-url", setting(io.Env, "ATMOST_NATS_URL", ""), "a NATS server holding ATMOST_EVENTS, for live events and publishing right away (env ATMOST_NATS_URL; empty: neither)")
	fs.Usage = func() {
		fmt.Fprint(io.Stderr, consoleUsage)
		fs.PrintDefaults()
	}
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(io.Stderr, "atmost console: unexpected argument %q\n", fs.Arg(0))
		return ExitUsage
	}
	token := setting(io.Env, console.TokenVariable, "")
	if *tokenFile != "" {
		if token != "" {
			fmt.Fprintf(io.Stderr, "atmost console: --token-file and %s are both given: give one\n", console.TokenVariable)
			return ExitUsage
		}
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fmt.Fprintf(io.Stderr, "atmost console: --token-file: %v\n", err)
			return ExitUsage
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			fmt.Fprintf(io.Stderr, "atmost console: --token-file %s is empty\n", *tokenFile)
			return ExitUsage
		}
	}
	if err := console.CheckListen(*listen, token); err != nil {
		fmt.Fprintf(io.Stderr, "atmost console: %v\n", err)
		return ExitUsage
	}
	l, closeLedger, err := openLedger(ctx, *databaseURL)
	if err != nil {
		fmt.Fprintf(io.Stderr, "atmost console: %v\n", err)
		return ExitError
	}
	defer closeLedger()
	cfg := console.Config{Ledger: l, Token: token}
	if url := strings.TrimSpace(*natsURL); url != "" {
		nc, err := connectNATS(url)
		if err != nil {
			fmt.Fprintf(io.Stderr, "atmost console: %v\n", err)
			return ExitError
		}
		defer nc.Close()
		if cfg.JetStream, err = jetstream.New(nc); err != nil {
			fmt.Fprintf(io.Stderr, "atmost console: %v\n", err)
			return ExitError
		}
	}
	running, err := console.Listen(ctx, cfg, *listen, *certFile, *keyFile)
	if err != nil {
		fmt.Fprintf(io.Stderr, "atmost console: %v\n", err)
		return ExitError
	}
	fmt.Fprintf(io.Stdout, "console: %s\n", running.URL)
	if host, _, _ := net.SplitHostPort(*listen); *certFile == "" && !console.LoopbackHost(host) {
		fmt.Fprintln(io.Stderr, "atmost console: serving off loopback without TLS: the token and the session cookie cross the network in the clear (give --tls-cert and --tls-key)")
	}
	if err := running.Wait(); err != nil {
		fmt.Fprintf(io.Stderr, "atmost console: %v\n", err)
		return ExitError
	}
	return ExitOK
}
