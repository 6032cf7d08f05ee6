package bluesky

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// refreshMargin: an access token that expires within this long is refreshed before a send
// rather than used, so that a send is rarely refused as ExpiredToken.
const refreshMargin = time.Minute

// session is an authenticated session of the account (com.atproto.server.createSession).
type session struct {
	did     string
	handle  string
	access  string // the access JWT: the Bearer of createRecord
	refresh string // the refresh JWT: the Bearer of refreshSession
	// expires is the access JWT's exp claim; zero when it could not be read.
	expires time.Time
	// stale: the PDS refused the access token; refresh before the next use.
	stale bool
}

// sessions keeps the account's one session. Session calls (createSession, refreshSession) are
// not sends: they create nothing the intent is about, so they may be made again, and they go
// through their own HTTP client. One call at a time: concurrent sends wait for it and share
// its session, so an expired token costs one refresh, not one per send (createSession is
// rate-limited per account on bsky.social).
type sessions struct {
	pds        string
	identifier string
	password   string
	http       *http.Client
	now        func() time.Time

	lock chan struct{} // held while a session call is made

	mu  sync.Mutex
	cur *session
}

func newSessions(cfg config, password string, now func() time.Time) *sessions {
	return &sessions{
		pds: cfg.pds, identifier: cfg.identifier, password: password, now: now,
		http: &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			// Never follow a redirect: it would carry the password or a token elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		lock: make(chan struct{}, 1),
	}
}

// current returns the session held, if any.
func (s *sessions) current() *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return nil
	}
	c := *s.cur
	return &c
}

// did returns the account's DID: the identifier when it is one, else the session's ("" when
// there is no session yet).
func (s *sessions) did() string {
	if validDID(s.identifier) {
		return s.identifier
	}
	if c := s.current(); c != nil {
		return c.did
	}
	return ""
}

// markStale records that the PDS refused access: the session is refreshed before its next use.
// Only the session that carried that token is marked: another send may already have renewed it.
func (s *sessions) markStale(access string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.access == access {
		s.cur.stale = true
	}
}

func (s *sessions) usable(c *session) bool {
	return c != nil && !c.stale && (c.expires.IsZero() || s.now().Before(c.expires.Add(-refreshMargin)))
}

// get returns a usable session: the one held, or a refreshed one, or a new one.
func (s *sessions) get(ctx context.Context) (session, error) {
	if c := s.current(); s.usable(c) {
		return *c, nil
	}
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return session{}, &sessionError{call: "wait for the session", err: ctx.Err()}
	}
	defer func() { <-s.lock }()
	c := s.current()
	if s.usable(c) {
		return *c, nil // another send renewed it while this one waited
	}
	if c != nil && c.refresh != "" {
		next, err := s.call(ctx, methodRefreshSession, c.refresh, nil)
		if err == nil {
			return s.store(next), nil
		}
		if !err.refused() {
			return session{}, err // the PDS could not be asked: do not spend a createSession
		}
		// The refresh token expired or was revoked: log in again.
	}
	body, err := json.Marshal(map[string]string{"identifier": s.identifier, "password": s.password})
	if err != nil {
		return session{}, &sessionError{call: methodCreateSession, err: err}
	}
	next, serr := s.call(ctx, methodCreateSession, "", body)
	if serr != nil {
		return session{}, serr
	}
	return s.store(next), nil
}

func (s *sessions) store(c session) session {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = &c
	return c
}

// sessionOutput is the output of createSession and refreshSession.
type sessionOutput struct {
	AccessJwt  string `json:"accessJwt"`
	RefreshJwt string `json:"refreshJwt"`
	Handle     string `json:"handle"`
	DID        string `json:"did"`
}

// call makes one session call: createSession with body, or refreshSession with the refresh
// token as Bearer and no body (the procedure takes no input).
func (s *sessions) call(ctx context.Context, method, bearer string, body []byte) (session, *sessionError) {
	fail := func(status int, x xrpcError, err error) (session, *sessionError) {
		return session{}, &sessionError{call: method, status: status, xrpc: x, err: err}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.pds+"/xrpc/"+method, rd)
	if err != nil {
		return fail(0, xrpcError{}, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fail(0, xrpcError{}, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fail(resp.StatusCode, parseXRPCError(b), nil)
	}
	if err != nil {
		return fail(resp.StatusCode, xrpcError{}, fmt.Errorf("reading the response: %w", err))
	}
	var out sessionOutput
	if err := json.Unmarshal(b, &out); err != nil {
		return fail(resp.StatusCode, xrpcError{}, fmt.Errorf("the response is not a session: %w", err))
	}
	switch {
	case out.AccessJwt == "" || out.RefreshJwt == "":
		return fail(resp.StatusCode, xrpcError{}, fmt.Errorf("the response holds no accessJwt or refreshJwt"))
	case !validDID(out.DID):
		return fail(resp.StatusCode, xrpcError{}, fmt.Errorf("the response's did %q is not a DID", out.DID))
	case validDID(s.identifier) && out.DID != s.identifier:
		return fail(resp.StatusCode, xrpcError{}, fmt.Errorf("the session is for %s, not for the account's %s", out.DID, s.identifier))
	}
	return session{did: out.DID, handle: out.Handle, access: out.AccessJwt, refresh: out.RefreshJwt,
		expires: jwtExpiry(out.AccessJwt)}, nil
}

// jwtExpiry reads a JWT's exp claim without verifying the token (the PDS verifies it; the
// adapter only wants to know when to refresh). Zero when there is none.
func jwtExpiry(token string) time.Time {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return time.Time{}
	}
	exp, err := claims.Exp.Int64()
	if err != nil || exp <= 0 {
		return time.Time{}
	}
	return time.Unix(exp, 0)
}

// sessionError is a session call that gave no session. It never holds the password or a
// token: net/http's errors do not carry headers or bodies, and the XRPC error is the PDS's.
type sessionError struct {
	call   string
	status int // 0 when no response arrived
	xrpc   xrpcError
	err    error
}

func (e *sessionError) Error() string {
	switch {
	case e.status != 0 && e.err == nil:
		return fmt.Sprintf("bluesky: %s: status %d %s: %s", e.call, e.status, e.xrpc.Name, e.xrpc.Message)
	case e.status != 0:
		return fmt.Sprintf("bluesky: %s: status %d: %v", e.call, e.status, e.err)
	}
	return fmt.Sprintf("bluesky: %s: %v", e.call, e.err)
}

func (e *sessionError) Unwrap() error { return e.err }

// refused: the PDS answered that these credentials (the password, or the refresh token) are
// not good: asking again with them will not help.
func (e *sessionError) refused() bool {
	return e.status == http.StatusUnauthorized || e.status == http.StatusForbidden ||
		(e.status == http.StatusBadRequest && e.err == nil)
}
