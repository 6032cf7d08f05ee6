package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// Settings are an account's webhook settings, the JSON of platform.Account.Settings. Unknown
// fields are refused; a field left out (its zero value) takes its default.
type Settings struct {
	// URL receives the send: http or https, without user information or fragment. Required.
	URL string `json:"url"`
	// Method of the send: POST (default), PUT, PATCH or DELETE. GET and HEAD are refused: a
	// side effect is not a read, and net/http replays reads on its own.
	Method string `json:"method,omitempty"`
	// Headers are sent with every request (send, read-back, lookup). They are part of the
	// prepared request and its hash, so they must not be secret: Authorization,
	// Proxy-Authorization and Cookie are refused here, as are the headers the adapter or
	// net/http set themselves (Idempotency-Key, Content-Type, Content-Length, Host, ...).
	Headers map[string]string `json:"headers,omitempty"`
	// CredentialHeader names the header that carries the account's credential (read through
	// platform.Account.Secret from the account's credential reference when the adapter is
	// opened), e.g. "Authorization". It is added at send time only: never to the prepared
	// request, its hash, an outcome's detail or an error. Set exactly when the account has a
	// credential reference.
	CredentialHeader string `json:"credential_header,omitempty"`
	// CredentialPrefix goes before the credential in its header, e.g. "Bearer ".
	CredentialPrefix string `json:"credential_prefix,omitempty"`
	// BodyTemplate is the JSON body; any string value exactly equal to a placeholder is
	// replaced: "$key" (the delivery key's text), "$account", "$action", "$target", "$text",
	// "$reply_to_object" (a reply's parent's object id, "" for any other intent) (strings) and
	// "$request" (the canonical request object itself, not a string). Object keys
	// are never replaced; a string that looks like an unknown placeholder ("$kye") is refused.
	// The body is sent as canonical JSON (RFC 8785). Default:
	// {"delivery_key":"$key","account":"$account","action":"$action","target":"$target","request":"$request"}.
	BodyTemplate json.RawMessage `json:"body_template,omitempty"`
	// ObjectIDPointer is the RFC 6901 JSON pointer to the created object's id in a 2xx
	// response body (a non-empty string or a number). Default "/id". A 2xx without one is an
	// unknown outcome.
	ObjectIDPointer string `json:"object_id_pointer,omitempty"`
	// DefinitiveStatuses are the statuses that prove the endpoint created nothing (a failed
	// intent, retryable by policy), each in 400-499: a 5xx may come from a server that failed
	// half way. Left out: transport.DefaultDefinitive. An empty list: none, every refusal is
	// an unknown outcome.
	DefinitiveStatuses []int `json:"definitive_statuses"`
	// ReadbackURL is where a created object is read back, with "{id}" (required) replaced by
	// the object id, path-escaped: the strongest proof of a success, the stored text compared
	// with the intent's. One of ReadbackURL, StatusURL and Confirm must say how a success is
	// confirmed (ErrNothingConfirms).
	ReadbackURL string `json:"readback_url,omitempty"`
	// ReadbackTextPointer is the JSON pointer to the object's text in the read-back body.
	// Default "/text"; nothing there reads as "".
	ReadbackTextPointer string `json:"readback_text_pointer,omitempty"`
	// StatusURL is the endpoint's idempotency-status lookup, with "{key}" (required) replaced
	// by the delivery key, path-escaped. It must answer for the key: 2xx with the object id
	// (at ObjectIDPointer) when the request was received, 404 when it never was; a 404 proves
	// not-sent (after ReconcileDelay). Without it the one reconciliation lookup is unavailable.
	StatusURL string `json:"status_url,omitempty"`
	// Confirm "response" takes a 2xx naming the object (at ObjectIDPointer) as the proof of a
	// success, for an endpoint that offers neither read-back nor status lookup: the intent is
	// published without a read-back, under its own reason (published_unread). It cannot be
	// combined with ReadbackURL, which is the stronger proof. Default "": no such trust.
	Confirm string `json:"confirm,omitempty"`
	// ReconcileDelay is how long after a send's deadline the lookup is meaningful (a Go
	// duration, positive). Default "30s".
	ReconcileDelay string `json:"reconcile_delay,omitempty"`
	// ContractVersion names the endpoint's API contract; an account pinned to another one is
	// refused at authorization. Default "".
	ContractVersion string `json:"contract_version,omitempty"`
}

// config is a validated Settings with its defaults applied.
type config struct {
	url            string
	method         string
	headers        http.Header
	credHeader     string
	credPrefix     string
	template       template
	idPointer      pointer
	definitive     []int
	readbackURL    string
	textPointer    pointer
	statusURL      string
	reconcileDelay time.Duration
	contract       string
	byResponse     bool
}

// ConfirmResponse is the Confirm value that takes the send's 2xx naming the object as proof.
const ConfirmResponse = "response"

// Headers a settings file may not set: credentials come only from the credential reference.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie"}

// Headers the adapter or net/http set themselves, or that change how a response is read.
var reservedHeaders = []string{"Idempotency-Key", "X-Idempotency-Key", "Content-Type", "Content-Length",
	"Host", "Transfer-Encoding", "Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer",
	"Upgrade", "Expect", "Accept-Encoding"}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidSettings, fmt.Sprintf(format, args...))
}

// parseSettings decodes and validates raw.
func parseSettings(raw json.RawMessage) (config, error) {
	var s Settings
	if len(bytes.TrimSpace(raw)) > 0 {
		// encoding/json keeps the last of two equal keys; the canonical parser refuses them.
		if _, err := identity.CanonicalObject(raw); err != nil {
			return config{}, invalid("not a JSON object without duplicate keys: %v", err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			return config{}, invalid("%v", err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return config{}, invalid("trailing data after the settings object")
		}
	}
	return s.validate()
}

func (s Settings) validate() (config, error) {
	var c config
	var err error
	if s.URL == "" {
		return c, invalid("url is required")
	}
	if c.url, err = checkURL("url", s.URL, ""); err != nil {
		return c, err
	}

	c.method = s.Method
	switch c.method {
	case "":
		c.method = http.MethodPost
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	case http.MethodGet, http.MethodHead:
		return c, invalid("method %s: a send must not be a read (and net/http replays reads on its own)", s.Method)
	default:
		return c, invalid("method %q: want POST, PUT, PATCH or DELETE", s.Method)
	}

	if s.CredentialHeader != "" {
		if !validHeaderName(s.CredentialHeader) {
			return c, invalid("credential_header %q is not a valid header name", s.CredentialHeader)
		}
		c.credHeader = http.CanonicalHeaderKey(s.CredentialHeader)
		if slices.Contains(reservedHeaders, c.credHeader) {
			return c, invalid("credential_header %s: the adapter sets that header itself", c.credHeader)
		}
	}
	if s.CredentialPrefix != "" {
		if c.credHeader == "" {
			return c, invalid("credential_prefix is set but credential_header is not")
		}
		if !validHeaderValue(s.CredentialPrefix) {
			return c, invalid("credential_prefix holds a control character")
		}
		c.credPrefix = s.CredentialPrefix
	}

	c.headers = http.Header{}
	for name, value := range s.Headers {
		if !validHeaderName(name) {
			return c, invalid("headers: %q is not a valid header name", name)
		}
		canon := http.CanonicalHeaderKey(name)
		switch {
		case slices.Contains(credentialHeaders, canon):
			return c, invalid("headers: %s is not allowed here: credentials come only from the account's credential reference (set credential_header)", canon)
		case slices.Contains(reservedHeaders, canon):
			return c, invalid("headers: %s is set by the adapter or net/http", canon)
		case canon == c.credHeader:
			return c, invalid("headers: %s is the credential_header", canon)
		case len(c.headers[canon]) > 0:
			return c, invalid("headers: %s is given twice (header names are case-insensitive)", canon)
		case !validHeaderValue(value):
			return c, invalid("headers: the value of %s holds a control character", canon)
		}
		c.headers[canon] = []string{value}
	}

	if c.template, err = parseTemplate(s.BodyTemplate); err != nil {
		return c, invalid("body_template: %v", err)
	}
	if c.idPointer, err = pointerOr("object_id_pointer", s.ObjectIDPointer, "/id"); err != nil {
		return c, err
	}

	if s.DefinitiveStatuses == nil {
		c.definitive = transport.DefaultDefinitive()
	} else {
		c.definitive = make([]int, 0, len(s.DefinitiveStatuses))
		for _, st := range s.DefinitiveStatuses {
			switch {
			case st < 400 || st > 499:
				return c, invalid("definitive_statuses: %d is not a 4xx: only a client error can prove the endpoint created nothing", st)
			case slices.Contains(c.definitive, st):
				return c, invalid("definitive_statuses: %d is listed twice", st)
			}
			c.definitive = append(c.definitive, st)
		}
		slices.Sort(c.definitive)
	}

	if s.ReadbackURL != "" {
		if c.readbackURL, err = checkURL("readback_url", s.ReadbackURL, "{id}"); err != nil {
			return c, err
		}
	} else if s.ReadbackTextPointer != "" {
		return c, invalid("readback_text_pointer is set but readback_url is not")
	}
	if c.textPointer, err = pointerOr("readback_text_pointer", s.ReadbackTextPointer, "/text"); err != nil {
		return c, err
	}
	if s.StatusURL != "" {
		if c.statusURL, err = checkURL("status_url", s.StatusURL, "{key}"); err != nil {
			return c, err
		}
	}

	c.reconcileDelay = 30 * time.Second
	if s.ReconcileDelay != "" {
		d, err := time.ParseDuration(s.ReconcileDelay)
		if err != nil {
			return c, invalid("reconcile_delay: %v", err)
		}
		if d <= 0 {
			return c, invalid("reconcile_delay %s: must be positive (requests still in flight must land before the lookup)", s.ReconcileDelay)
		}
		c.reconcileDelay = d
	}
	c.contract = s.ContractVersion
	switch {
	case s.Confirm != "" && s.Confirm != ConfirmResponse:
		return c, invalid("confirm %q: the one value is %q", s.Confirm, ConfirmResponse)
	case s.Confirm == ConfirmResponse && c.readbackURL != "":
		return c, invalid("confirm %q and readback_url are both set: the read-back is the stronger proof; drop one", ConfirmResponse)
	case s.Confirm == "" && c.readbackURL == "" && c.statusURL == "":
		return c, fmt.Errorf("%w: %w", ErrInvalidSettings, ErrNothingConfirms)
	}
	c.byResponse = s.Confirm == ConfirmResponse
	return c, nil
}

// checkURL validates an http(s) URL; placeholder, when not "", must occur in it.
func checkURL(field, raw, placeholder string) (string, error) {
	probe := raw
	if placeholder != "" {
		if !strings.Contains(raw, placeholder) {
			return "", invalid("%s %q: must contain %s", field, raw, placeholder)
		}
		probe = strings.ReplaceAll(raw, placeholder, "x")
	}
	u, err := url.Parse(probe)
	switch {
	case err != nil:
		return "", invalid("%s: %v", field, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", invalid("%s %q: want an http or https URL", field, raw)
	case u.Host == "":
		return "", invalid("%s %q: no host", field, raw)
	case u.User != nil:
		return "", invalid("%s: user information in the URL would be part of the prepared request; use credential_header", field)
	case u.Fragment != "" || strings.Contains(probe, "#"):
		return "", invalid("%s %q: a fragment is never sent", field, raw)
	}
	return raw, nil
}

func pointerOr(field, s, def string) (pointer, error) {
	if s == "" {
		s = def
	}
	p, err := parsePointer(s)
	if err != nil {
		return pointer{}, invalid("%s: %v", field, err)
	}
	return p, nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue refuses control characters other than tab (CR and LF among them).
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
