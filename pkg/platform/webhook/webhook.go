// Package webhook is the generic HTTP JSON adapter: it delivers an intent to any endpoint that
// takes a JSON body, with the URL and the body template configured per account (Settings), the
// delivery key as the Idempotency-Key header, and, when the endpoint offers them, a read-back
// endpoint (to confirm a success) and an idempotency-status endpoint (for the one
// reconciliation lookup).
//
// Every send goes through one transport.Client per adapter (no retry, no redirect, HTTP/1.1
// only) and is classified by transport.Classify. The account's credential is read when the
// adapter is opened and added to the credential header at send time only: it is never part of
// the prepared request or its hash, and it is redacted from every outcome detail and error.
//
// An account must say how a success is confirmed (ErrNothingConfirms): by the read-back, by
// the status lookup (the success goes indeterminate until the lookup finds the object), or by
// the response itself ("confirm": "response", published as published_unread). Without
// status_url the lookup is unavailable, so an unknown outcome stays indeterminate until an
// operator resolves it.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// Name is the platform name accounts use for this adapter.
const Name = "webhook"

// adapter is the webhook adapter opened for one account.
type adapter struct {
	account    string
	cfg        config
	credential string // the credential header's value (prefix included); never logged or stored
	secret     string // the bare credential, for redaction
	client     *transport.Client
}

// Open validates a's settings (Settings) and credential and returns its adapter. Every error
// about the settings or the credential wraps ErrInvalidSettings (or platform.ErrNoCredential
// when the reference names nothing), and none holds the credential.
func Open(a platform.Account) (platform.Adapter, error) {
	cfg, err := parseSettings(a.Settings)
	if err != nil {
		return nil, err
	}
	ad := &adapter{account: a.ID, cfg: cfg, client: transport.New(transport.Config{})}
	switch {
	case a.CredentialRef != "" && cfg.credHeader == "":
		return nil, invalid("the account has a credential reference but credential_header is not set: the credential would never be sent")
	case a.CredentialRef == "" && cfg.credHeader != "":
		return nil, invalid("credential_header is set but the account has no credential reference")
	case a.CredentialRef == "":
		return ad, nil
	}
	secret, err := a.Secret()
	if err != nil {
		return nil, fmt.Errorf("webhook: credential: %w", err)
	}
	switch {
	case secret == "":
		return nil, invalid("the credential %s names is empty", a.CredentialRef)
	case !validHeaderValue(secret):
		return nil, invalid("the credential %s names holds a control character, so it cannot be sent in a header", a.CredentialRef)
	}
	ad.secret = secret
	ad.credential = cfg.credPrefix + secret
	return ad, nil
}

// Capabilities are the account's settings: a status lookup exactly when status_url is set, a
// success confirmed by the response exactly when confirm is "response".
func (a *adapter) Capabilities() platform.Capabilities {
	return platform.Capabilities{
		StatusLookup:        a.cfg.statusURL != "",
		DefinitiveStatuses:  append([]int(nil), a.cfg.definitive...),
		ContractVersion:     a.cfg.contract,
		ReconcileDelay:      a.cfg.reconcileDelay,
		ConfirmedByResponse: a.cfg.byResponse,
		UnavailableStatuses: platform.DeclaredStatuses(platform.DefaultUnavailableStatuses(), a.cfg.definitive),
		AuthStatuses:        platform.DeclaredStatuses(platform.DefaultAuthStatuses(), a.cfg.definitive),
	}
}

// Prepare renders the body template for r and sets Idempotency-Key (the delivery key) and
// Content-Type; the credential is not among the headers.
func (a *adapter) Prepare(r platform.Request) (platform.Prepared, error) {
	if r.Key.IsZero() {
		return platform.Prepared{}, errors.New("webhook: prepare: the request has no delivery key")
	}
	if r.Account != a.account {
		return platform.Prepared{}, fmt.Errorf("webhook: prepare: the request is for account %q, the adapter for %q", r.Account, a.account)
	}
	body, err := a.cfg.template.render(r)
	if err != nil {
		return platform.Prepared{}, fmt.Errorf("webhook: prepare %s: body: %w", r.Key, err)
	}
	header := a.cfg.headers.Clone()
	header.Set("Idempotency-Key", r.Key.String())
	header.Set("Content-Type", "application/json")
	return platform.NewPrepared(r, a.cfg.method, a.cfg.url, header, body), nil
}

// Send writes p once, with the credential added, and classifies the exchange. A prepared
// request whose fields no longer match its hash is not sent at all.
func (a *adapter) Send(ctx context.Context, p platform.Prepared) platform.Outcome {
	if platform.NewPrepared(p.Request, p.Method, p.URL, p.Header, p.Body).Hash != p.Hash {
		return platform.Outcome{Result: platform.NotSent, Reason: platform.ReasonConnectionFailed,
			Detail: map[string]any{"error": "webhook: the prepared request does not match its hash; nothing was sent"}}
	}
	ex := a.client.Do(ctx, p.Method, p.URL, a.withCredential(p.Header), p.Body)
	out := transport.Classify(ex, a.cfg.definitive, func(body []byte) (string, error) { return idAt(a.cfg.idPointer, body) })
	out.Detail = a.redactDetail(out.Detail)
	out.Signal = a.Capabilities().Signal(out)
	return out
}

// ReadBack GETs readback_url for objectID: platform.ErrNotFound on 404, the text at
// readback_text_pointer ("" when there is none) on 2xx, an error otherwise. Without
// readback_url it returns ErrNoReadBack.
func (a *adapter) ReadBack(ctx context.Context, r platform.Request, objectID string) (platform.Object, error) {
	if a.cfg.readbackURL == "" {
		return platform.Object{}, ErrNoReadBack
	}
	if objectID == "" {
		return platform.Object{}, errors.New("webhook: read back: no object id")
	}
	u := strings.ReplaceAll(a.cfg.readbackURL, "{id}", url.PathEscape(objectID))
	ex := a.get(ctx, u)
	fail := func(format string, args ...any) error {
		return a.redactError(fmt.Errorf("webhook: read back %q: "+format, append([]any{objectID}, args...)...))
	}
	switch {
	case ex.Status == 0:
		return platform.Object{}, fail("%w", ex.Err)
	case ex.Status == http.StatusNotFound:
		return platform.Object{}, fail("%w", platform.ErrNotFound)
	case ex.Status < 200 || ex.Status > 299:
		return platform.Object{}, fail("status %d", ex.Status)
	case ex.Err != nil:
		return platform.Object{}, fail("reading the body: %w", ex.Err)
	}
	v, ok, err := a.cfg.textPointer.lookup(ex.Body)
	if err != nil {
		return platform.Object{}, fail("response body: %w", err)
	}
	obj := platform.Object{ID: objectID}
	if ok {
		if v[0] != '"' {
			return platform.Object{}, fail("the value at %s is not a string", a.cfg.textPointer.text)
		}
		obj.Text = stringValue(v)
	}
	return obj, nil
}

// Lookup GETs status_url for r's delivery key: Found with the object id on a 2xx naming one;
// NotFound with ProvenNotSent on 404 (the endpoint is declared to answer for the key);
// Unavailable for anything else, and when no status_url is configured.
func (a *adapter) Lookup(ctx context.Context, r platform.Request) platform.Lookup {
	if a.cfg.statusURL == "" {
		return platform.Lookup{Result: platform.Unavailable, Detail: map[string]any{
			"error": "no status lookup is configured (status_url): a webhook cannot be looked up otherwise"}}
	}
	u := strings.ReplaceAll(a.cfg.statusURL, "{key}", url.PathEscape(r.Key.String()))
	ex := a.get(ctx, u)
	detail := map[string]any{"step": string(ex.Step)}
	if ex.Status != 0 {
		detail["status"] = ex.Status
	}
	if ex.Err != nil {
		detail["error"] = ex.Err.Error()
	}
	out := platform.Lookup{Result: platform.Unavailable}
	switch {
	case ex.Status == http.StatusNotFound:
		out = platform.Lookup{Result: platform.NotFound, ProvenNotSent: true}
	case ex.Status >= 200 && ex.Status <= 299 && ex.Err == nil:
		id, err := idAt(a.cfg.idPointer, ex.Body)
		if err != nil {
			detail["error"] = err.Error()
			break
		}
		out = platform.Lookup{Result: platform.Found, ObjectID: id}
	}
	out.Detail = a.redactDetail(detail)
	return out
}

// get sends a read with the account's headers and credential.
func (a *adapter) get(ctx context.Context, u string) transport.Exchange {
	header := a.cfg.headers.Clone()
	header.Set("Accept", "application/json")
	return a.client.Do(ctx, http.MethodGet, u, a.withCredential(header), nil)
}

// withCredential returns a copy of h with the credential header added.
func (a *adapter) withCredential(h map[string][]string) http.Header {
	out := http.Header(h).Clone()
	if out == nil {
		out = http.Header{}
	}
	if a.cfg.credHeader != "" {
		out.Set(a.cfg.credHeader, a.credential)
	}
	return out
}

func (a *adapter) redactDetail(d map[string]any) map[string]any {
	if a.secret == "" {
		return d
	}
	for k, v := range d {
		if s, ok := v.(string); ok {
			d[k] = redact(s, a.secret)
		}
	}
	return d
}

func (a *adapter) redactError(err error) error {
	if a.secret == "" {
		return err
	}
	return redactedError{err: err, secret: a.secret}
}
