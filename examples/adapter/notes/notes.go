// Package notes is an example platform adapter written outside atmost's tree: it posts notes
// (the action "post", a text) to a small HTTP API, the one atmost's platform simulator
// (cmd/platformsim) serves, so that it can be run against a real server:
//
//	POST {url}/v1/accounts/{account}/post  Idempotency-Key: dk1:...  {"text": "..."}  -> 201 {"id": "..."}
//	GET  {url}/v1/objects/{id}                                                          -> 200 {"id", "key", "text", ...} or 404
//	GET  {url}/v1/accounts/{account}/objects?key=dk1:...                                -> 200 {"objects": [...]}
//
// It keeps the contract every adapter keeps (pkg/platform/platformtest): one request per send
// through pkg/platform/transport (no retry, no redirect), classified by transport.Classify, so
// NotSent only when no byte left or the platform refused definitively; a read-back that returns
// the text the platform holds; a lookup that finds the note by its delivery key and proves
// nothing when it does not (it declares no status lookup).
package notes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// Name is the platform name the example registers the adapter under.
const Name = "notes"

// ErrInvalidSettings: the account's settings are not {"url": "http(s)://..."}.
var ErrInvalidSettings = errors.New("notes: invalid account settings")

type adapter struct {
	account string
	base    string
	client  *transport.Client
}

// Open opens the adapter for account a, whose settings are {"url": "http://host:port"}.
func Open(a platform.Account) (platform.Adapter, error) {
	var s struct {
		URL string `json:"url"`
	}
	dec := json.NewDecoder(bytes.NewReader(a.Settings))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSettings, err)
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: url %q: an http(s) URL without user, query or fragment", ErrInvalidSettings, s.URL)
	}
	if a.ID == "" {
		return nil, fmt.Errorf("%w: the account has no id", ErrInvalidSettings)
	}
	return &adapter{account: a.ID, base: strings.TrimRight(u.String(), "/"), client: transport.New(transport.Config{})}, nil
}

func (a *adapter) Capabilities() platform.Capabilities {
	return platform.Capabilities{DefinitiveStatuses: transport.DefaultDefinitive(),
		ContractVersion: "notes/v1", ReconcileDelay: 2 * time.Second,
		// Which definitive statuses say the platform cannot take anything now, and which that
		// the credential is refused: the account holds on them instead of spending attempts.
		UnavailableStatuses: platform.DeclaredStatuses(platform.DefaultUnavailableStatuses(), transport.DefaultDefinitive()),
		AuthStatuses:        platform.DeclaredStatuses(platform.DefaultAuthStatuses(), transport.DefaultDefinitive())}
}

// Prepare renders the create request: the same bytes for the same request.
func (a *adapter) Prepare(r platform.Request) (platform.Prepared, error) {
	switch {
	case r.Account != a.account:
		return platform.Prepared{}, fmt.Errorf("notes: request for %q, adapter opened for %q", r.Account, a.account)
	case r.Action != "post" || r.Target != "":
		return platform.Prepared{}, fmt.Errorf("notes: only a post without a target: %w", platform.ErrUnsendable)
	}
	body, err := json.Marshal(map[string]string{"text": r.Text})
	if err != nil {
		return platform.Prepared{}, err
	}
	header := map[string][]string{"Content-Type": {"application/json"}, "Idempotency-Key": {r.Key.String()}}
	return platform.NewPrepared(r, http.MethodPost, a.base+"/v1/accounts/"+url.PathEscape(r.Account)+"/post", header, body), nil
}

// Send writes p once and classifies the exchange; the object id is the answer's "id".
func (a *adapter) Send(ctx context.Context, p platform.Prepared) platform.Outcome {
	if platform.NewPrepared(p.Request, p.Method, p.URL, p.Header, p.Body).Hash != p.Hash || !strings.HasPrefix(p.URL, a.base+"/") {
		return platform.Outcome{Result: platform.NotSent, Reason: platform.ReasonConnectionFailed,
			Detail: map[string]any{"step": string(transport.StepNone), "error": "notes: the prepared request was altered"}}
	}
	ex := a.client.Do(ctx, p.Method, p.URL, http.Header(p.Header), p.Body)
	out := transport.Classify(ex, transport.DefaultDefinitive(), func(body []byte) (string, error) {
		var o struct {
			ID string `json:"id"`
		}
		err := json.Unmarshal(body, &o)
		return o.ID, err
	})
	// What the outcome says about the platform, as the capabilities declare it.
	out.Signal = a.Capabilities().Signal(out)
	return out
}

type note struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Key     string `json:"key"`
	Text    string `json:"text"`
}

// ReadBack reads the note by id: platform.ErrNotFound on a 404.
func (a *adapter) ReadBack(ctx context.Context, r platform.Request, objectID string) (platform.Object, error) {
	ex := a.client.Do(ctx, http.MethodGet, a.base+"/v1/objects/"+url.PathEscape(objectID), nil, nil)
	switch {
	case ex.Status == http.StatusNotFound:
		return platform.Object{}, fmt.Errorf("notes: read-back of %s: %w", objectID, platform.ErrNotFound)
	case ex.Err != nil:
		return platform.Object{}, fmt.Errorf("notes: read-back of %s: %w", objectID, ex.Err)
	case ex.Status != http.StatusOK:
		return platform.Object{}, fmt.Errorf("notes: read-back of %s: status %d", objectID, ex.Status)
	}
	var n note
	if err := json.Unmarshal(ex.Body, &n); err != nil {
		return platform.Object{}, fmt.Errorf("notes: read-back of %s: %w", objectID, err)
	}
	if n.ID != objectID || n.Key != r.Key.String() || n.Account != r.Account {
		return platform.Object{}, fmt.Errorf("notes: read-back of %s: another request's note", objectID)
	}
	return platform.Object{ID: n.ID, Text: n.Text}, nil
}

// Lookup lists the account's notes with the request's delivery key: one is Found; none is
// NotFound, which proves nothing (no status lookup is declared); a failure is Unavailable.
func (a *adapter) Lookup(ctx context.Context, r platform.Request) platform.Lookup {
	detail := map[string]any{"lookup": "listing"}
	if r.Account != a.account {
		detail["error"] = "request for another account"
		return platform.Lookup{Result: platform.Unavailable, Detail: detail}
	}
	ex := a.client.Do(ctx, http.MethodGet, a.base+"/v1/accounts/"+url.PathEscape(r.Account)+"/objects?key="+url.QueryEscape(r.Key.String()), nil, nil)
	detail["status"] = ex.Status
	var answer struct {
		Objects []note `json:"objects"`
	}
	err := ex.Err
	if err == nil && ex.Status != http.StatusOK {
		err = fmt.Errorf("status %d", ex.Status)
	}
	if err == nil {
		err = json.Unmarshal(ex.Body, &answer)
	}
	if err != nil {
		detail["error"] = err.Error()
		return platform.Lookup{Result: platform.Unavailable, Detail: detail}
	}
	for _, n := range answer.Objects {
		if n.Key == r.Key.String() && n.ID != "" {
			return platform.Lookup{Result: platform.Found, ObjectID: n.ID, Detail: detail}
		}
	}
	return platform.Lookup{Result: platform.NotFound, Detail: detail}
}
