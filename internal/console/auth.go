package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"go.uber.org/zap"
)

// Who may use the console, and how a change is proven to come from them.
//
// A person logs in with a name and the token (only a name when the console has no token, which
// it then serves on loopback only); the session is a random id in a cookie that is HttpOnly,
// SameSite=Strict and, over TLS, Secure and named __Host- (the browser then sends it to this
// host and port only, never a sibling's), and it holds the operator's name, written as the
// actor "console:NAME" of every change (a name holds no '/': only a process's actor does). A
// session ends after IdleTimeout unused, and SessionLifetime after its login. A script sends
// the token as "Authorization: Bearer" and names itself in the Atmost-Operator header for a
// change. Wrong tokens are throttled (throttle).
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
	// operatorHeader names a script's operator for a change made with the Bearer token.
	operatorHeader = "Atmost-Operator"
	// maxOperator bounds a login name.
	maxOperator = 64
	// confirmTTL is how long a preview's confirmation stays usable.
	confirmTTL = 10 * time.Minute
)

type session struct {
	id       string
	operator string
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

// visitor is who is making a request: a person's session, or a script with the token.
type visitor struct {
	session *session // nil for a script
	// operator is the name changes are recorded under ("" for a script that gave none).
	operator string
}

// actor is how the ledger's history and control rows name the visitor.
func (v visitor) actor() string { return "console:" + v.operator }

func (v visitor) csrf() string {
	if v.session == nil {
		return ""
	}
	return v.session.csrf
}

// authed serves h to a visitor with a session or the token, and sends anyone else to the login
// page without a byte of the ledger. A POST must also pass the CSRF check.
func (s *Server) authed(h func(w http.ResponseWriter, r *http.Request, v visitor)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok, wait := s.visitorOf(r)
		if !ok {
			if wait != "" {
				http.Error(w, wait, http.StatusTooManyRequests)
				return
			}
			if r.Method == http.MethodGet && r.Header.Get("Authorization") == "" {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "log in first: this console needs a session or the token", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			problem, status := "", http.StatusForbidden
			switch {
			case !sameOrigin(r):
				problem = "a change must come from the console's own pages"
			case v.session != nil && !same(r.PostFormValue("csrf"), v.session.csrf):
				problem = "the form's CSRF token is missing or wrong (reload the page); nothing was changed"
			case v.session == nil && v.operator == "":
				problem, status = "a script names its operator in the "+operatorHeader+" header for a change", http.StatusBadRequest
			}
			if problem != "" {
				s.log.Warn("change refused", zap.String("client", clientOf(r)), zap.String("actor", v.actor()),
					zap.String("path", r.URL.Path), zap.String("why", problem))
				http.Error(w, "refused: "+problem, status)
				return
			}
		}
		h(w, r, v)
	}
}

// visitorOf is who sent r: a script with the token, or a person's session. A wrong Bearer
// token counts against the client's guesses (throttle), and one from a client that has none
// left is not even compared: then wait says why.
func (s *Server) visitorOf(r *http.Request) (v visitor, ok bool, wait string) {
	if auth := r.Header.Get("Authorization"); auth != "" {
		if wait := s.throttled(r, "bearer"); wait != "" {
			return visitor{}, false, wait
		}
		token, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || s.cfg.Token == "" || !same(strings.TrimSpace(token), s.cfg.Token) {
			s.wrongToken(r, "bearer", "")
			return visitor{}, false, ""
		}
		s.metrics.logins.WithLabelValues("bearer", "ok").Inc()
		name, _ := cleanOperator(r.Header.Get(operatorHeader))
		return visitor{operator: name}, true, ""
	}
	c, err := r.Cookie(s.cookieName(sessionCookie))
	if err != nil {
		return visitor{}, false, ""
	}
	sess := s.sessions.get(c.Value, s.now(), s.cfg.IdleTimeout)
	if sess == nil {
		return visitor{}, false, ""
	}
	return visitor{session: sess, operator: sess.operator}, true, ""
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
func (s *Server) wrongToken(r *http.Request, how, operator string) {
	client := clientOf(r)
	s.guesses.wrong(client, s.now())
	s.metrics.logins.WithLabelValues(how, "wrong").Inc()
	s.log.Warn("login refused: wrong token", zap.String("client", client), zap.String("how", how), zap.String("operator", operator))
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

// cleanOperator checks a login name: printable, no spaces at the ends, at most maxOperator, and
// no '/', so that its actor console:NAME never reads as a process's <role>/<instance>
// (docs/design.md#who-acted).
func cleanOperator(name string) (string, bool) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > maxOperator || strings.Contains(name, "/") {
		return "", false
	}
	for _, r := range name {
		if !unicode.IsPrint(r) {
			return "", false
		}
	}
	return name, true
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
	s.render(w, status, "login", visitor{}, map[string]any{"Problem": problem, "Next": safeNext(r.FormValue("next")), "NeedToken": s.cfg.Token != "", "LoginCSRF": nonce})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	client := clientOf(r)
	c, err := r.Cookie(s.cookieName(loginCookie))
	if err != nil || !same(r.PostFormValue("csrf"), c.Value) || !sameOrigin(r) {
		s.log.Info("login refused: expired or foreign form", zap.String("client", client))
		s.renderLogin(w, r, "The login form had expired or came from elsewhere: try again.", http.StatusForbidden)
		return
	}
	if s.cfg.Token != "" {
		if wait := s.throttled(r, "form"); wait != "" {
			s.renderLogin(w, r, "Refused: "+wait+".", http.StatusTooManyRequests)
			return
		}
	}
	name, ok := cleanOperator(r.PostFormValue("operator"))
	if !ok {
		s.log.Info("login refused: bad name", zap.String("client", client))
		s.renderLogin(w, r, "Give your name (printable, at most 64 characters, no /): every change you make is recorded under it.", http.StatusBadRequest)
		return
	}
	if s.cfg.Token != "" && !same(r.PostFormValue("token"), s.cfg.Token) {
		s.wrongToken(r, "form", name)
		s.renderLogin(w, r, "That is not the console's token.", http.StatusUnauthorized)
		return
	}
	now := s.now()
	sess := &session{id: randomID(), operator: name, csrf: randomID(), expires: now.Add(SessionLifetime), lastSeen: now}
	s.sessions.add(sess, s.cfg.IdleTimeout)
	s.metrics.logins.WithLabelValues("form", "ok").Inc()
	s.log.Info("login", zap.String("client", client), zap.String("actor", visitor{operator: name}.actor()))
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
	owner   string // the session id, or "bearer:" and the operator
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
