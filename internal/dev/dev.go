// Package dev runs every atmost role in one process: `atmost dev` for development, and the
// stack under `atmost demo`. The ledger is migrated (and its database created) on start; NATS is
// the one at ATMOST_NATS_URL, or an embedded nats-server with JetStream when it is unset. Each
// role is the production role (the same Main, configuration, endpoints and metrics), run in a
// goroutine instead of a process of its own.
package dev

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/atmost/atmost/internal/console"
	"github.com/atmost/atmost/internal/migrate"
	"github.com/atmost/atmost/internal/role/dispatch"
	"github.com/atmost/atmost/internal/role/ingest"
	"github.com/atmost/atmost/internal/role/reconcile"
	"github.com/atmost/atmost/internal/role/sweep"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform/sim"
)

// DefaultDatabaseURL is the ledger when ATMOST_DATABASE_URL is unset: the local PostgreSQL
// server's "atmost" database.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/atmost?sslmode=disable"

// Roles are the roles a stack runs, in start order.
var Roles = []string{"ingest", "dispatcher", "sweeper", "reconciler"}

var mains = map[string]func(ctx context.Context, args []string, getenv func(string) (string, bool), stderr io.Writer) int{
	"ingest":     ingest.Main,
	"dispatcher": dispatch.Main,
	"sweeper":    sweep.Main,
	"reconciler": reconcile.Main,
}

// Options configure a Stack.
type Options struct {
	// DatabaseURL is the ledger; it is created when missing and migrated.
	DatabaseURL string
	// NATSURL is the NATS server; "" starts an embedded one with JetStream.
	NATSURL string
	// DataDir holds the embedded server's JetStream store. "" is a fresh temporary directory,
	// removed when the stack stops.
	DataDir string
	// NATSPort is the embedded server's client port; 0 picks a free one.
	NATSPort int
	// HTTPAddrs are the roles' /healthz, /readyz and /metrics addresses, by role name; a role
	// not named serves on its own default, HTTPAddrs(DefaultHTTPBasePort). ATMOST_HTTP_ADDR in
	// Env is one process's address and is not used: four roles cannot share it.
	HTTPAddrs map[string]string
	// Env is the roles' configuration (ATMOST_* variables), the process environment in
	// production. The stack's database and NATS URLs are set over it.
	Env func(string) (string, bool)
	// Logs receives every role's JSON log lines.
	Logs io.Writer
	// Console is the operator console's address; "" starts none. ConsoleToken is its shared
	// bootstrap token (console.Config.Token); "" makes one for the run (Stack.ConsoleToken).
	Console      string
	ConsoleToken string
	// SimURL is the platform simulator the caller serves ("" for none). On a ledger without
	// accounts the stack configures SimAccount on it, so that a newcomer's first intent has an
	// account to go to without a step of its own.
	SimURL string
}

// SimAccount is the account a fresh ledger gets on the platform simulator of `atmost dev`.
const SimAccount = "sim-1"

// Stack is a running set of roles.
type Stack struct {
	DatabaseURL string
	NATSURL     string
	// Applied lists the migrations this start applied (none when the schema was current).
	Applied []migrate.Applied
	// ConsoleURL is where the operator console serves ("" when Options.Console was empty).
	ConsoleURL string
	// ConsoleToken is the bootstrap token the stack made for its console, to be shown to the
	// person who started it ("" when Options gave one, or started no console). It lives as long
	// as the run: a development ledger needs no operator added to be looked at.
	ConsoleToken string
	// SimAccount is SimAccount when the ledger has it (created by this start when
	// SimAccountCreated), "" otherwise.
	SimAccount        string
	SimAccountCreated bool

	nats    *server.Server
	console *console.Running
	closers []func()
	tempDir string
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	failure error
	failed  chan struct{}
}

// Start migrates the ledger, starts NATS when needed, and starts every role. The roles run
// until ctx ends or Stop is called; Failed reports a role that stopped on its own.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.DatabaseURL == "" {
		opts.DatabaseURL = DefaultDatabaseURL
	}
	if opts.Env == nil {
		opts.Env = func(string) (string, bool) { return "", false }
	}
	if opts.Logs == nil {
		opts.Logs = io.Discard
	}
	addrs := HTTPAddrs(DefaultHTTPBasePort)
	for name, addr := range opts.HTTPAddrs {
		addrs[name] = addr
	}
	wanted := maps.Clone(addrs)
	if opts.NATSURL == "" && opts.NATSPort != 0 {
		wanted[EmbeddedNATS] = net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.NATSPort))
	}
	if opts.Console != "" {
		wanted[Console] = opts.Console
	}
	if err := CheckFree(wanted); err != nil {
		return nil, err
	}
	applied, err := migrate.Up(ctx, opts.DatabaseURL, migrate.Options{CreateDatabase: true})
	if err != nil {
		return nil, fmt.Errorf("the ledger at ATMOST_DATABASE_URL: %w", err)
	}
	s := &Stack{DatabaseURL: opts.DatabaseURL, NATSURL: opts.NATSURL, Applied: applied, failed: make(chan struct{})}
	if err := s.simAccount(ctx, opts.SimURL); err != nil {
		return nil, err
	}
	if s.NATSURL == "" {
		if err := s.startNATS(opts); err != nil {
			return nil, err
		}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	context.AfterFunc(ctx, cancel)
	for _, name := range Roles {
		getenv := overlay(opts.Env, map[string]string{
			"ATMOST_DATABASE_URL": s.DatabaseURL,
			"ATMOST_NATS_URL":     s.NATSURL,
			"ATMOST_HTTP_ADDR":    addrs[name],
		})
		main := mains[name]
		s.wg.Go(func() {
			code := main(rctx, nil, getenv, opts.Logs)
			if rctx.Err() == nil {
				s.fail(fmt.Errorf("%s stopped on its own with exit code %d (its log lines say why)", name, code))
			}
		})
	}
	if opts.Console != "" {
		if err := s.startConsole(rctx, opts); err != nil {
			_ = s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// simAccount finds SimAccount in the ledger or, on a ledger without accounts and with a
// simulator to point at, creates it. A ledger that has accounts is someone's own: nothing is
// added to it.
func (s *Stack) simAccount(ctx context.Context, simURL string) error {
	pool, err := pgxpool.New(ctx, s.DatabaseURL)
	if err != nil {
		return fmt.Errorf("the ledger at ATMOST_DATABASE_URL: %w", err)
	}
	defer pool.Close()
	l, err := ledger.New(pool, ledger.Config{Actor: "atmost-dev"})
	if err != nil {
		return err
	}
	accounts, err := l.Accounts(ctx)
	if err != nil {
		return fmt.Errorf("the ledger's accounts: %w", err)
	}
	for _, a := range accounts {
		if a.ID == SimAccount {
			s.SimAccount = SimAccount
			return nil
		}
	}
	if len(accounts) > 0 || simURL == "" {
		return nil
	}
	settings, err := json.Marshal(map[string]string{"url": simURL})
	if err != nil {
		return err
	}
	err = l.AddAccount(ctx, ledger.Account{ID: SimAccount, Platform: sim.Name, Settings: settings}, ledger.Actor{Name: "atmost-dev", Reason: "atmost dev: a fresh ledger's account on its own platform simulator"})
	switch {
	case errors.Is(err, ledger.ErrAccountExists): // another atmost dev on the same ledger, just now
	case err != nil:
		return fmt.Errorf("account %s: %w", SimAccount, err)
	default:
		s.SimAccountCreated = true
	}
	s.SimAccount = SimAccount
	return nil
}

// startConsole serves the operator console on the stack's ledger and NATS, as `atmost
// console` does.
func (s *Stack) startConsole(ctx context.Context, opts Options) error {
	pool, err := pgxpool.New(ctx, s.DatabaseURL)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	s.closers = append(s.closers, pool.Close)
	l, err := ledger.New(pool, ledger.Config{Actor: "atmost-console"})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	nc, err := nats.Connect(s.NATSURL, nats.Name("atmost console"))
	if err != nil {
		return fmt.Errorf("console: NATS: %w", err)
	}
	s.closers = append(s.closers, nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	token := opts.ConsoleToken
	if token == "" {
		token = console.NewToken()
		s.ConsoleToken = token
	}
	s.console, err = console.Listen(ctx, console.Config{Ledger: l, Token: token, JetStream: js}, opts.Console, "", "")
	if err != nil {
		return fmt.Errorf("console on %s (--console \"\" starts none): %w", opts.Console, err)
	}
	s.ConsoleURL = s.console.URL
	return nil
}

// DefaultHTTPBasePort is the port of ingest's /healthz, /readyz and /metrics; the dispatcher,
// the sweeper and the reconciler serve on the next three, in Roles order: each role's own
// default address (a test keeps them in step).
const DefaultHTTPBasePort = 9101

// HTTPAddrs returns every role's address on 127.0.0.1, from port base on in Roles order.
func HTTPAddrs(base int) map[string]string {
	out := make(map[string]string, len(Roles))
	for i, name := range Roles {
		out[name] = net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i))
	}
	return out
}

// EmbeddedNATS names the embedded NATS server's client address in a BusyError.
const EmbeddedNATS = "embedded NATS"

// Console names the operator console's address in a BusyError.
const Console = "the operator console"

// BusyError is an address a stack needs that something else listens on.
type BusyError struct {
	Name string // the role, EmbeddedNATS, or what the caller named it
	Addr string
	Err  error
}

func (e *BusyError) Error() string {
	what := "the " + e.Name + "'s /healthz, /readyz and /metrics"
	if !slices.Contains(Roles, e.Name) {
		what = e.Name
	}
	return fmt.Sprintf("%s (%s) is in use, nothing was started: %v", e.Addr, what, e.Err)
}

func (e *BusyError) Unwrap() error { return e.Err }

// CheckFree listens on each address, by name, and closes it again: a *BusyError names the first
// one (in name order) that cannot be listened on. A port 0 (any free port) is not checked. It
// runs before anything starts, so that a busy port is named rather than found by one role of
// four; a port taken in between is still reported by the role that cannot listen.
func CheckFree(addrs map[string]string) error {
	names := make([]string, 0, len(addrs))
	for name := range addrs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		addr := addrs[name]
		if _, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return &BusyError{Name: name, Addr: addr, Err: err}
		}
		_ = ln.Close()
	}
	return nil
}

// overlay returns getenv with values set over it.
func overlay(getenv func(string) (string, bool), values map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := values[name]; ok {
			return v, true
		}
		return getenv(name)
	}
}

func (s *Stack) startNATS(opts Options) error {
	dir := opts.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "atmost-dev-nats-")
		if err != nil {
			return fmt.Errorf("embedded NATS: %w", err)
		}
		dir, s.tempDir = tmp, tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("embedded NATS: data directory %s: %w", dir, err)
	}
	port := opts.NATSPort
	if port == 0 {
		port = server.RANDOM_PORT
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "atmost-dev",
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   filepath.Join(dir, "jetstream"),
		NoLog:      true,
		NoSigs:     true,
	})
	if err != nil {
		return fmt.Errorf("embedded NATS: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("embedded NATS: not ready for connections after 10s (port %d taken? give another --nats-port, 0 for any free one)", opts.NATSPort)
	}
	s.nats = srv
	s.NATSURL = fmt.Sprintf("nats://%s", srv.Addr().(*net.TCPAddr).String())
	return nil
}

func (s *Stack) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failure == nil {
		s.failure = err
		close(s.failed)
	}
}

// Failed is closed when a role stopped on its own; Err then says which.
func (s *Stack) Failed() <-chan struct{} { return s.failed }

// Err is the first role failure, nil while every role runs.
func (s *Stack) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// Stop stops every role (each finishes its work in hand, as on SIGTERM), then the embedded
// NATS server, and returns the first role failure, if any.
func (s *Stack) Stop() error {
	s.cancel()
	if s.console != nil {
		_ = s.console.Wait()
	}
	s.wg.Wait()
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	if s.nats != nil {
		s.nats.Shutdown()
		s.nats.WaitForShutdown()
	}
	if s.tempDir != "" {
		_ = os.RemoveAll(s.tempDir)
	}
	return s.Err()
}
