// Package console is atmost's operator console: a web page for the intents that wait for a
// person, served by `atmost console` (and by `atmost dev` and `atmost demo`). It reads the ledger
// through pkg/ledger's read API and changes it only through the ledger's guarded operations,
// the very calls the atmost command makes (Park, Resolve, RetryAs, SetSwitch, SetPolicy,
// ReplayRejects), with the logged-in operator as the actor and the reason they give: it never
// sends anything to a platform (a replayed reject becomes a pending intent, as ingest would
// have stored it, for the dispatchers), and a change the ledger refuses changes nothing.
//
// HTML is rendered by html/template from embedded templates; the little JavaScript there is
// (live updates on the overview) is optional, every page reads without it. The same reads and
// changes are a JSON API under /api/v1 (api.go, docs/console-api.yaml), served by the same
// code as the pages, with the same authentication, confirmations and audit. Every request but
// the login page and the assets needs a session (a login) or the token as a Bearer header;
// every change is a POST that carries the session's CSRF token and, to be applied, a
// single-use confirmation issued with the preview of its effect, so a forged request is
// refused and a replayed one changes nothing. Every request is bounded before anyone is
// known (its headers, its body, the time it may take to arrive), wrong tokens are throttled
// per client and in total, and every login, refusal and change is logged.
package console

import (
	"context"
	"crypto/tls"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/atmost/atmost/internal/adapters"
	"github.com/atmost/atmost/internal/relay"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// DefaultListen is the console's address unless told otherwise: loopback only.
const DefaultListen = "127.0.0.1:9105"

// TokenVariable names the environment variable that holds the console's shared token, the
// bootstrap operator's (Config.Token).
const TokenVariable = "ATMOST_CONSOLE_TOKEN"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Config configures a console.
type Config struct {
	// Ledger is read and changed; its operations are the console's only way to change it.
	Ledger *ledger.Ledger
	// Token, when set, is the console's shared token: it logs in as the built-in operator
	// ledger.BootstrapOperator (role operator, recorded as console:bootstrap), so that the first
	// operators can be made and a development stack can be opened. Everyone else logs in with
	// a token of their own (atmost operators add).
	Token string
	// TLS says the console is served over TLS: its cookies are then marked Secure.
	TLS bool
	// JetStream, when set, is where ATMOST_EVENTS is read (the live overview, an intent's
	// events) and where an action's event is published right away; without it the next relay
	// round of a running role publishes it, and the overview polls.
	JetStream jetstream.JetStream
	// Platforms are the adapters an account's must open for its intents to be served: an
	// intent's page says when one does not (adapters.IntentWait). Nil means adapters.Registered.
	Platforms platform.Registry
	// LookupEnv reads an account's credential reference from the environment for that check;
	// nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Logger gets every login, refusal and change, and the ledger's errors; nil logs nothing.
	Logger *zap.Logger
	// IdleTimeout ends a session unused this long; zero means DefaultIdleTimeout. A session
	// ends SessionLifetime after its login however busy it is.
	IdleTimeout time.Duration
	// ReadTimeout bounds the time a request may take to arrive, its body included; zero means
	// DefaultReadTimeout.
	ReadTimeout time.Duration
	// Registerer, when set, gets the console's metrics (Collectors).
	Registerer prometheus.Registerer
}

// The limits of a request, applied before the visitor is known: a guesser or a stranger may
// send them. The console's forms are small; a body over MaxBody is refused unread.
const (
	// DefaultIdleTimeout ends a session nobody used for this long.
	DefaultIdleTimeout = 30 * time.Minute
	// SessionLifetime ends every session this long after its login.
	SessionLifetime = 12 * time.Hour
	// DefaultReadTimeout bounds the arrival of one request, headers and body.
	DefaultReadTimeout = 30 * time.Second
	// WriteTimeout bounds the answer to one request (the live event stream lifts it).
	WriteTimeout = 60 * time.Second
	// KeepAliveTimeout closes a kept-alive connection that sends no next request.
	KeepAliveTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes = 16 << 10
	// MaxBody bounds a request's body.
	MaxBody = 64 << 10
)

// Server is a console. It is an http.Handler.
type Server struct {
	cfg      Config
	l        *ledger.Ledger
	pages    map[string]*template.Template
	mux      *http.ServeMux
	log      *zap.Logger
	relay    *relay.Relay
	sessions *sessions
	mu       sync.Mutex
	confirms map[string]*confirmation
	guesses  *throttle
	metrics  *metrics
	now      func() time.Time
}

// New returns a console on cfg.Ledger.
func New(cfg Config) (*Server, error) {
	if cfg.Ledger == nil {
		return nil, errors.New("console: a ledger is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Platforms == nil {
		cfg.Platforms = adapters.Registered()
	}
	if cfg.LookupEnv == nil {
		cfg.LookupEnv = os.LookupEnv
	}
	if cfg.Token != "" {
		if err := CheckToken(cfg.Token); err != nil {
			return nil, err
		}
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	s := &Server{cfg: cfg, l: cfg.Ledger, log: cfg.Logger.Named("console"), sessions: newSessions(),
		confirms: map[string]*confirmation{}, guesses: newThrottle(), metrics: newMetrics(), now: time.Now}
	if cfg.Registerer != nil {
		for _, c := range s.Collectors() {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("console metrics: %w", err)
			}
		}
	}
	if cfg.JetStream != nil {
		s.relay = relay.New(cfg.Ledger, cfg.JetStream, relay.Config{AckTimeout: 10 * time.Second, Logger: cfg.Logger})
	}
	var err error
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets")
	files := http.StripPrefix("/assets/", http.FileServerFS(assets))
	m.HandleFunc("GET /assets/", func(w http.ResponseWriter, r *http.Request) {
		// A file, never a listing of the directory's files.
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
	m.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		// Where a browser looks for the icon of a page that names none (a plain-text answer).
		w.Header().Set("Content-Type", "image/svg+xml")
		http.ServeFileFS(w, r, assetFS, "assets/favicon.svg")
	})
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /logout", s.authed(s.logout))
	m.HandleFunc("GET /{$}", s.authed(s.overview))
	m.HandleFunc("GET /overview/live", s.authed(s.overviewLive))
	m.HandleFunc("GET /events", s.authed(s.liveEvents))
	m.HandleFunc("GET /intents", s.authed(s.intents))
	m.HandleFunc("GET /intents/{key}", s.authed(s.intent))
	m.HandleFunc("POST /intents/{key}/act", s.changes(s.act))
	m.HandleFunc("GET /bulk", s.authed(s.bulkForm))
	m.HandleFunc("POST /bulk", s.changes(s.bulk))
	m.HandleFunc("GET /rejects", s.authed(s.rejects))
	m.HandleFunc("POST /rejects/replay", s.changes(s.replay))
	m.HandleFunc("GET /controls", s.authed(s.controls))
	m.HandleFunc("POST /controls/switch", s.changes(s.switchAct))
	m.HandleFunc("POST /controls/policy", s.changes(s.policyAct))
	s.apiRoutes(m)
	s.mux = m
}

// ServeHTTP serves the console, with the headers every response carries: no framing, no
// script or style from elsewhere, no caching of what the ledger holds, and over TLS, HSTS. A
// body is read up to MaxBody, and a form whose values the ledger would not store is refused
// before any handler reads it (checkRequest).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	if s.cfg.TLS {
		// A browser that saw the console over TLS never tries it in the clear again, where the
		// session cookie and the token could be read on the way.
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	// same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with a form,
	// and the origin check (sameOrigin) refuses it.
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	if !strings.HasPrefix(r.URL.Path, "/assets/") {
		h.Set("Cache-Control", "no-store")
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	if status, problem := checkRequest(r); problem != "" {
		s.log.Info("request refused", zap.String("client", clientOf(r)), zap.String("method", r.Method),
			zap.String("path", r.URL.Path), zap.Int("status", status), zap.String("why", problem))
		s.refuse(w, r, status, requestCodes[status], "refused, nothing was changed: "+problem)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// CheckListen refuses an address the console cannot listen on.
func CheckListen(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	return nil
}

// LoopbackHost reports whether host (with or without a port) names this machine only:
// localhost or a loopback address.
func LoopbackHost(host string) bool { return loopbackHost(host) }

func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve serves the console on ln until ctx ends, over TLS when certFile and keyFile are given.
// It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener, certFile, keyFile string) error {
	// Requests live in ctx, so that the live event streams end with it and Shutdown can finish.
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: s.cfg.ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: KeepAliveTimeout, MaxHeaderBytes: MaxHeaderBytes,
		ErrorLog: zap.NewStdLog(s.log), BaseContext: func(net.Listener) context.Context { return ctx }}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return fmt.Errorf("console TLS: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, srv.TLSConfig)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-done
		return nil
	}
	return err
}

// parseKey reads a delivery key from a path or form value.
func parseKey(s string) (identity.DeliveryKey, bool) {
	k, err := identity.ParseDeliveryKey(strings.TrimSpace(s))
	return k, err == nil
}

// Running is a console serving on its address.
type Running struct {
	// URL is where to point a browser.
	URL  string
	done chan error
	stop context.CancelFunc
}

// Listen checks addr (CheckListen), listens there and serves the console until ctx ends or
// Stop is called, over TLS when certFile and keyFile are given.
func Listen(ctx context.Context, cfg Config, addr, certFile, keyFile string) (*Running, error) {
	if err := CheckListen(addr); err != nil {
		return nil, err
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("console TLS: give both the certificate and the key, or neither")
	}
	cfg.TLS = certFile != ""
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	scheme := "http"
	if cfg.TLS {
		scheme = "https"
	}
	ctx, stop := context.WithCancel(ctx)
	r := &Running{URL: scheme + "://" + ln.Addr().String(), done: make(chan error, 1), stop: stop}
	go func() { r.done <- s.Serve(ctx, ln, certFile, keyFile) }()
	return r, nil
}

// Wait returns when the console stopped, with the error that stopped it (nil after ctx ended).
func (r *Running) Wait() error { return <-r.done }

// Stop stops the console and waits for it.
func (r *Running) Stop() error {
	r.stop()
	return r.Wait()
}
