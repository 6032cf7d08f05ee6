package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// wireBody is the create request's body. Its fields are in sorted order, and Prepare passes
// the encoding through identity.CanonicalJSON, so the same Request gives the same bytes.
type wireBody struct {
	Action  string          `json:"action"`
	Request json.RawMessage `json:"request"`
	Target  string          `json:"target"`
	Text    string          `json:"text"`
}

// Prepare renders POST {url}/v1/accounts/{account}/{action} with the delivery key as the
// Idempotency-Key and the canonical JSON {"action", "request", "target", "text"} as the body;
// a reply's target is the object its parent created (Request.Reply.ObjectID).
// It fails for a request without a delivery key or action, for another account than the
// adapter's (ErrWrongAccount), or when r.Request is not a JSON object.
func (a *adapter) Prepare(r platform.Request) (platform.Prepared, error) {
	switch {
	case r.Key.IsZero():
		return platform.Prepared{}, errors.New("sim: prepare: the request has no delivery key")
	case r.Account != a.account:
		return platform.Prepared{}, fmt.Errorf("%w: prepare: request for %q, adapter opened for %q", ErrWrongAccount, r.Account, a.account)
	case r.Action == "":
		return platform.Prepared{}, fmt.Errorf("sim: prepare: the request has no action: %w", platform.ErrUnsendable)
	}
	req, err := identity.CanonicalObject(r.Request)
	if err != nil {
		return platform.Prepared{}, fmt.Errorf("sim: prepare: the request projection: %w (%w)", err, platform.ErrUnsendable)
	}
	target := r.Target
	if r.Reply != nil {
		// A reply targets the object its parent created.
		if target = r.Reply.ObjectID; target == "" {
			return platform.Prepared{}, fmt.Errorf("sim: prepare: a reply whose parent's object is not known (%s is not published)", r.Reply.Parent)
		}
	}
	body, err := json.Marshal(wireBody{Action: r.Action, Request: req, Target: target, Text: r.Text})
	if err != nil {
		return platform.Prepared{}, fmt.Errorf("sim: prepare: encoding the body: %w", err)
	}
	if body, err = identity.CanonicalJSON(body); err != nil {
		return platform.Prepared{}, fmt.Errorf("sim: prepare: canonical body: %w", err)
	}
	u := a.base + "/v1/accounts/" + url.PathEscape(r.Account) + "/" + url.PathEscape(r.Action)
	header := map[string][]string{
		"Content-Type":    {"application/json"},
		"Idempotency-Key": {r.Key.String()},
	}
	return platform.NewPrepared(r, http.MethodPost, u, header, body), nil
}

// Send writes p once through the adapter's transport.Client and classifies the exchange with
// transport.Classify (transport.DefaultDefinitive; the object id is the answer's "id"). A p
// that does not match its own hash, or that is addressed elsewhere than the adapter's
// simulator, is not sent at all: NotSent, with the refusal in Detail.
func (a *adapter) Send(ctx context.Context, p platform.Prepared) platform.Outcome {
	if err := a.check(p); err != nil {
		return platform.Outcome{Result: platform.NotSent, Reason: platform.ReasonConnectionFailed,
			Detail: map[string]any{"step": string(transport.StepNone), "error": err.Error()}}
	}
	ex := a.client.Do(ctx, p.Method, p.URL, http.Header(p.Header), p.Body)
	out := transport.Classify(ex, a.caps.DefinitiveStatuses, objectID)
	out.Signal = a.caps.Signal(out)
	return out
}

// check refuses a prepared request that was altered after Prepare: what was authorized (its
// hash) is what is sent, and only to this adapter's simulator.
func (a *adapter) check(p platform.Prepared) error {
	if platform.NewPrepared(p.Request, p.Method, p.URL, p.Header, p.Body).Hash != p.Hash {
		return errors.New("sim: send refused: the prepared request does not match its hash")
	}
	if !strings.HasPrefix(p.URL, a.base+"/") {
		return fmt.Errorf("sim: send refused: %s is not on %s", p.URL, a.base)
	}
	return nil
}

// objectID reads the created object's id from a 2xx answer.
func objectID(body []byte) (string, error) {
	var o struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(body, &o); err != nil {
		return "", err
	}
	return o.ID, nil
}
