package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/atmost/atmost/pkg/ledger"
)

// Who may use the console, and how a change is proven to come from them.
//
// Every person has a token of their own (atmost operators add): the token names an operator of
// the ledger, and the operator's name and role are who the visitor is. A change is recorded
// under the actor "console:NAME" of that identity, and of nothing the visitor sends: no header
// or form field names the actor. The console's shared token (Config.Token), when it is set, is
// the built-in operator BootstrapOperator. A person logs in with the token at the login form;
// the session is a random id in a cookie that is HttpOnly, SameSite=Strict and, over TLS,
// Secure and named __Host- (the browser then sends it to this host and port only, never a
// sibling's), and it holds the operator's name. The operator is read from the ledger again on
// every request, so a revoked one's sessions end at once. A session ends after IdleTimeout
// unused, and SessionLifetime after its login. A script sends its token as "Authorization:
// Bearer". A viewer reads every page and changes nothing (changes). Wrong tokens are
// throttled (throttle).
//
// Every POST but the login carries the session's CSRF token (a field of every form), compared in
// constant time; the login carries one of its own, a cookie set with the form (double submit).
// A change is applied only with a confirmation: a single-use id issued with the preview of the
// change, bound to the session and to exactly the change previewed, and consumed when used. A
// forged request lacks the CSRF token; a replayed one finds its confirmation used.

const (
	sessionCookie = "atmost_console"
	loginCookie   = "atmost_console_login"
	// hostPrefix names a cookie the browser keeps only if it is Secure, for Path=/ and without
	// a Domain: sent to this origin alone.
	hostPrefix = "__Host-"
	// confirmTTL is how long a preview's confirmation stays usable.
	confirmTTL = 10 * time.Minute
)

type session struct {
	id       string
	operator string // the name of the operator whose token logged in
	csrf     string
	expires  time.Time // SessionLifetime after the login
	lastSeen time.Time
	flash    string
}

type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func newSessions() *sessions { return &sessions{m: map[string]*session{}} }

// get returns the session id at now, and marks it used; a session past its lifetime or unused
// for longer than idle is ended.
func (ss *sessions) get(id string, now time.Time, idle time.Duration) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[id]
	if s == nil {
		return nil
	}
	if now.After(s.expires) || now.Sub(s.lastSeen) > idle {
		delete(ss.m, id)
		return nil
	}
	s.lastSeen = now
	return s
}

func (ss *sessions) add(s *session, idle time.Duration) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for id, old := range ss.m {
		if s.lastSeen.After(old.expires) || s.lastSeen.Sub(old.lastSeen) > idle {
			delete(ss.m, id)
		}
	}
	ss.m[s.id] = s
}

func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

// randomID is 32 random bytes, URL-safe.
func randomID() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on the platforms Go supports
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// same compares two secrets in constant time; an empty one never matches.
func same(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// visitor is who is making a request: a person's session, or a script with its token.
type visitor struct {
	session *session // nil for a script
	// operator is the identity's name, which changes are recorded under.
	operator string
	role     ledger.OperatorRole
}

// actor is how the ledger's history and control rows name the visitor.
func (v visitor) actor() string { return "console:" + v.operator }

// canChange says whether the visitor may make the console's changes: a viewer may not.
func (v visitor) canChange() bool { return v.role == ledger.RoleOperator }

func (v visitor) csrf() string {
	if v.session == nil {
		return ""
	}
	return v.session.csrf
}

// authed serves h to a visitor with a session or a token, and sends anyone else to the login
// page without a byte of the ledger. A POST must also pass the CSRF check.
func (s *Server) authed(h func(w http.ResponseWriter, r *http.Request, v visitor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok, refused := s.visitorOf(r)
		if !ok {
			if refused != nil {
				s.refuse(w, r, refused.status, refused.code, refused.why)
				return
			}
			if r.Method == http.MethodGet && r.Header.Get("Authorization") == "" && !isAPI(r) {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.refuse(w, r, http.StatusUnauthorized, codeUnauthorized, "log in first: this console needs a session or an operator's token")
			return
		}
		if r.Method == http.MethodPost {
			problem, status := "", http.StatusForbidden
			switch {
			case !sameOrigin(r):
				problem = "a change must come from the console's own pages"
			case v.session != nil && !same(r.PostFormValue("csrf"), v.session.csrf):
				problem = "the form's CSRF token is missing or wrong (reload the page); nothing was changed"
			}
			if problem != "" {
				s.log.Warn("change refused", zap.String("client", clientOf(r)), zap.String("actor", v.actor()),
					zap.String("path", r.URL.Path), zap.String("why", problem))
				s.refuse(w, r, status, codeForbidden, "refused: "+problem)
				return
			}
		}
		h(w, r, v)
	}
}

// changes serves h, a change, to a visitor authed lets in whose role may change the ledger,
// and refuses a viewer.
func (s *Server) changes(h func(w http.ResponseWriter, r *http.Request, v visitor)) http.HandlerFunc {
	return s.authed(func(w http.ResponseWriter, r *http.Request, v visitor) {
		if !v.canChange() {
			s.log.Warn("change refused", zap.String("client", clientOf(r)), zap.String("actor", v.actor()),
				zap.String("path", r.URL.Path), zap.String("why", "a viewer"))
			s.refuse(w, r, http.StatusForbidden, codeViewer, "refused: "+v.operator+" is a viewer, who reads the console and changes nothing; nothing was changed")
			return
		}
		h(w, r, v)
	})
}

// turnedAway is why a visitor is turned away with more than a redirect to the login.
type turnedAway struct {
	status int
	code   string // the API's error code
	why    string
}

// identify is the operator token names: the console's shared token is BootstrapOperator, any
// other is looked up in the ledger by its hash. ledger.ErrUnknownOperator means it names nobody
// (a wrong token, or a revoked operator's).
func (s *Server) identify(ctx context.Context, token string) (ledger.Operator, error) {
	if same(token, s.cfg.Token) {
		return ledger.Operator{Name: ledger.BootstrapOperator, Role: ledger.RoleOperator}, nil
	}
	return s.l.OperatorByToken(ctx, token)
}

// current is the session's operator as the ledger holds it now, or false when it is revoked:
// the session then ends. The bootstrap operator lives as long as the console's token.
func (s *Server) current(ctx context.Context, sess *session) (ledger.OperatorRole, bool, error) {
	if sess.operator == ledger.BootstrapOperator {
		return ledger.RoleOperator, s.cfg.Token != "", nil
	}
	op, err := s.l.Operator(ctx, sess.operator)
	if errors.Is(err, ledger.ErrUnknownOperator) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return op.Role, op.RevokedAt == nil, nil
}

// visitorOf is who sent r: a script with its token, or a person's session whose operator is
// not revoked. A wrong Bearer token counts against the client's guesses (throttle), and one
// from a client that has none left is not even compared: then refused says why, as it does
// when the ledger cannot say who the visitor is.
func (s *Server) visitorOf(r *http.Request) (v visitor, ok bool, refused *turnedAway) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		if wait := s.throttled(r, "bearer"); wait != "" {
			return visitor{}, false, &turnedAway{http.StatusTooManyRequests, codeThrottled, wait}
		}
		token, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok {
			s.wrongToken(r, "bearer")
			return visitor{}, false, nil
		}
		op, err := s.identify(r.Context(), strings.TrimSpace(token))
		if errors.Is(err, ledger.ErrUnknownOperator) {
			s.wrongToken(r, "bearer")
			return visitor{}, false, nil
		}
		if err != nil {
			s.log.Error("who is it: "+err.Error(), zap.String("client", clientOf(r)))
			return visitor{}, false, &turnedAway{http.StatusServiceUnavailable, codeUnavailable, "the ledger could not say whose token this is; try again"}
		}
		s.metrics.logins.WithLabelValues("bearer", "ok").Inc()
		return visitor{operator: op.Name, role: op.Role}, true, nil
	}
	c, err := r.Cookie(s.cookieName(sessionCookie))
	if err != nil {
		return visitor{}, false, nil
	}
	sess := s.sessions.get(c.Value, s.now(), s.cfg.IdleTimeout)
	if sess == nil {
		return visitor{}, false, nil
	}
	role, live, err := s.current(r.Context(), sess)
	if err != nil {
		s.log.Error("who is it: "+err.Error(), zap.String("client", clientOf(r)))
		return visitor{}, false, &turnedAway{http.StatusServiceUnavailable, codeUnavailable, "the ledger could not say who you are; try again"}
	}
	if !live {
		s.sessions.remove(sess.id)
		s.log.Warn("session ended: its operator is revoked", zap.String("client", clientOf(r)), zap.String("actor", visitor{operator: sess.operator}.actor()))
		return visitor{}, false, nil
	}
	return visitor{session: sess, operator: sess.operator, role: role}, true, nil
}

// throttled says why a token (how: form, bearer) from r's client is refused unread, and logs
// and counts it; "" when it is not.
func (s *Server) throttled(r *http.Request, how string) string {
	client := clientOf(r)
	no, which := s.guesses.refused(client, s.now())
	if !no {
		return ""
	}
	s.metrics.logins.WithLabelValues(how, "throttled").Inc()
	s.log.Warn("login throttled", zap.String("client", client), zap.String("how", how), zap.String("limit", which))
	if which == "client" {
		return fmt.Sprintf("too many wrong tokens from your address: one more try per %s", clientEvery)
	}
	return "too many wrong tokens at this console: logins are paused a moment"
}

// wrongToken counts, logs and throttles a wrong token.
func (s *Server) wrongToken(r *http.Request, how string) {
	client := clientOf(r)
	s.guesses.wrong(client, s.now())
	s.metrics.logins.WithLabelValues(how, "wrong").Inc()
	s.log.Warn("login refused: wrong token", zap.String("client", client), zap.String("how", how))
}

// sameOrigin refuses a POST a browser says comes from another site. Browsers send Origin
// (and Sec-Fetch-Site) with every POST; a script sends neither and is checked by its token.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser, or one that sends none: the CSRF token still decides
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// cookieName is name, with the __Host- prefix over TLS.
func (s *Server) cookieName(name string) string {
	if s.cfg.TLS {
		return hostPrefix + name
	}
	return name
}

// cookie is one of the console's cookies: Path=/ and no Domain, as __Host- requires.
func (s *Server) cookie(name, value string, maxAge time.Duration) *http.Cookie {
	return &http.Cookie{Name: s.cookieName(name), Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: s.cfg.TLS, MaxAge: int(maxAge / time.Second)}
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.renderLogin(w, r, "", http.StatusOK)
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, problem string, status int) {
	nonce := randomID()
	http.SetCookie(w, s.cookie(loginCookie, nonce, 30*time.Minute))
	s.render(w, status, "login", visitor{}, map[string]any{"Problem": problem, "Next": safeNext(r.FormValue("next")), "LoginCSRF": nonce})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	client := clientOf(r)
	c, err := r.Cookie(s.cookieName(loginCookie))
	if err != nil || !same(r.PostFormValue("csrf"), c.Value) || !sameOrigin(r) {
		s.log.Info("login refused: expired or foreign form", zap.String("client", client))
		s.renderLogin(w, r, "The login form had expired or came from elsewhere: try again.", http.StatusForbidden)
		return
	}
	if wait := s.throttled(r, "form"); wait != "" {
		s.renderLogin(w, r, "Refused: "+wait+".", http.StatusTooManyRequests)
		return
	}
	op, err := s.identify(r.Context(), strings.TrimSpace(r.PostFormValue("token")))
	if errors.Is(err, ledger.ErrUnknownOperator) {
		s.wrongToken(r, "form")
		s.renderLogin(w, r, "That token names no operator of this console (or a revoked one).", http.StatusUnauthorized)
		return
	}
	if err != nil {
		s.log.Error("login: "+err.Error(), zap.String("client", client))
		s.renderLogin(w, r, "The ledger could not say whose token this is: try again.", http.StatusServiceUnavailable)
		return
	}
	now := s.now()
	sess := &session{id: randomID(), operator: op.Name, csrf: randomID(), expires: now.Add(SessionLifetime), lastSeen: now}
	s.sessions.add(sess, s.cfg.IdleTimeout)
	s.metrics.logins.WithLabelValues("form", "ok").Inc()
	s.log.Info("login", zap.String("client", client), zap.String("actor", visitor{operator: op.Name}.actor()), zap.String("role", string(op.Role)))
	http.SetCookie(w, s.cookie(sessionCookie, sess.id, SessionLifetime))
	http.SetCookie(w, s.cookie(loginCookie, "", -time.Second))
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, v visitor) {
	if v.session != nil {
		s.sessions.remove(v.session.id)
		s.log.Info("logout", zap.String("client", clientOf(r)), zap.String("actor", v.actor()))
	}
	http.SetCookie(w, s.cookie(sessionCookie, "", -time.Second))
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// confirmation is a previewed change waiting for its confirmation: usable once, by the session
// (or script) that previewed it, for exactly the change previewed.
type confirmation struct {
	owner   string // the session id, or "bearer:" and the operator's name
	digest  string // of the change's parameters
	expires time.Time
	plan    any // what a bulk action or a replay previewed: *bulkPlan, *replayPlan
}

func ownerOf(v visitor) string {
	if v.session != nil {
		return v.session.id
	}
	return "bearer:" + v.operator
}

// issue records a previewed change and returns the id its confirmation must carry.
func (s *Server) issue(v visitor, digest string, plan any) string {
	id := randomID()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for k, c := range s.confirms {
		if now.After(c.expires) {
			delete(s.confirms, k)
		}
	}
	s.confirms[id] = &confirmation{owner: ownerOf(v), digest: digest, expires: now.Add(confirmTTL), plan: plan}
	return id
}

// redeem consumes the confirmation id for the change digest: it succeeds once, for its owner,
// for the very change previewed, before it expires.
func (s *Server) redeem(v visitor, id, digest string) (*confirmation, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.confirms[id]
	if c == nil || c.owner != ownerOf(v) || c.digest != digest || time.Now().After(c.expires) {
		return nil, false
	}
	delete(s.confirms, id)
	return c, true
}

// digest names a change by its parameters, in order.
func digest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}
