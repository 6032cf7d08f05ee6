package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// object is the simulator's JSON form of an object, the fields the adapter reads.
type object struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Key     string `json:"key"`
	Text    string `json:"text"`
}

// ReadBack fetches GET {url}/v1/objects/{id}. It returns platform.ErrNotFound on a 404, and
// another error when the simulator could not be reached, answered another status, sent an
// unreadable body, or the object belongs to another delivery key or account (the id does not
// name r's object).
func (a *adapter) ReadBack(ctx context.Context, r platform.Request, objectID string) (platform.Object, error) {
	if objectID == "" {
		return platform.Object{}, fmt.Errorf("sim: read-back: empty object id")
	}
	ex := a.client.Do(ctx, http.MethodGet, a.base+"/v1/objects/"+url.PathEscape(objectID), nil, nil)
	switch {
	case ex.Status == 0:
		return platform.Object{}, fmt.Errorf("sim: read-back of %s: %w", objectID, ex.Err)
	case ex.Status == http.StatusNotFound:
		return platform.Object{}, fmt.Errorf("sim: read-back of %s: %w", objectID, platform.ErrNotFound)
	case ex.Status != http.StatusOK:
		return platform.Object{}, fmt.Errorf("sim: read-back of %s: status %d", objectID, ex.Status)
	case ex.Err != nil:
		return platform.Object{}, fmt.Errorf("sim: read-back of %s: reading the answer: %w", objectID, ex.Err)
	}
	var o object
	if err := json.Unmarshal(ex.Body, &o); err != nil {
		return platform.Object{}, fmt.Errorf("sim: read-back of %s: decoding the answer: %w", objectID, err)
	}
	if o.ID != objectID || o.Key != r.Key.String() || o.Account != r.Account {
		return platform.Object{}, fmt.Errorf("sim: read-back of %s: the object is %s of key %s on account %q, not this request's", objectID, o.ID, o.Key, o.Account)
	}
	return platform.Object{ID: o.ID, Text: o.Text}, nil
}

// maxPerRead is how many ids one GET /v1/objects names (the simulator's limit).
const maxPerRead = 100

// ReadBackMany reads items with GET {url}/v1/objects?id=..., up to 100 ids a request. An
// object the answer leaves out is platform.ErrNotFound; a request that failed fails each of
// its items as ReadBack would; an object of another key or account is an error for its item
// alone.
func (a *adapter) ReadBackMany(ctx context.Context, items []platform.ReadItem) []platform.ReadResult {
	out := make([]platform.ReadResult, len(items))
	for start := 0; start < len(items); start += maxPerRead {
		chunk := items[start:min(start+maxPerRead, len(items))]
		a.readChunk(ctx, chunk, out[start:start+len(chunk)])
	}
	return out
}

func (a *adapter) readChunk(ctx context.Context, items []platform.ReadItem, out []platform.ReadResult) {
	q := make(url.Values, 1)
	for i, it := range items {
		if it.ObjectID == "" {
			out[i].Err = fmt.Errorf("sim: read-back: empty object id")
			continue
		}
		q.Add("id", it.ObjectID)
	}
	if len(q["id"]) == 0 {
		return
	}
	fail := func(err error) {
		for i := range out {
			if out[i].Err == nil {
				out[i].Err = fmt.Errorf("sim: read-back of %s: %w", items[i].ObjectID, err)
			}
		}
	}
	ex := a.client.Do(ctx, http.MethodGet, a.base+"/v1/objects?"+q.Encode(), nil, nil)
	switch {
	case ex.Status == 0:
		fail(ex.Err)
		return
	case ex.Status != http.StatusOK:
		fail(fmt.Errorf("status %d", ex.Status))
		return
	case ex.Err != nil:
		fail(fmt.Errorf("reading the answer: %w", ex.Err))
		return
	}
	var l struct {
		Objects []object `json:"objects"`
	}
	if err := json.Unmarshal(ex.Body, &l); err != nil {
		fail(fmt.Errorf("decoding the answer: %w", err))
		return
	}
	found := make(map[string]object, len(l.Objects))
	for _, o := range l.Objects {
		found[o.ID] = o
	}
	for i, it := range items {
		if out[i].Err != nil {
			continue
		}
		o, ok := found[it.ObjectID]
		switch {
		case !ok:
			out[i].Err = fmt.Errorf("sim: read-back of %s: %w", it.ObjectID, platform.ErrNotFound)
		case o.Key != it.Request.Key.String() || o.Account != it.Request.Account:
			out[i].Err = fmt.Errorf("sim: read-back of %s: the object is of key %s on account %q, not this request's", it.ObjectID, o.Key, o.Account)
		default:
			out[i].Object = platform.Object{ID: o.ID, Text: o.Text}
		}
	}
}

// Lookup is the one reconciliation lookup. With status_lookup it asks GET
// {url}/v1/idempotency/{key}: created is Found, not_seen is NotFound with ProvenNotSent (the
// simulator answers for the original request's key), in_progress or any failure is
// Unavailable. Without it, it lists the account's objects with that key: one or more is Found,
// none is NotFound that proves nothing (the listing lags behind creation), any failure is
// Unavailable. Detail holds the endpoint, the status and the error text.
func (a *adapter) Lookup(ctx context.Context, r platform.Request) platform.Lookup {
	if r.Account != a.account {
		return platform.Lookup{Result: platform.Unavailable, Detail: map[string]any{
			"error": fmt.Sprintf("%v: request for %q, adapter opened for %q", ErrWrongAccount, r.Account, a.account)}}
	}
	if a.caps.StatusLookup {
		return a.statusLookup(ctx, r)
	}
	return a.listingLookup(ctx, r)
}

func (a *adapter) statusLookup(ctx context.Context, r platform.Request) platform.Lookup {
	detail := map[string]any{"lookup": "idempotency_status"}
	ex := a.client.Do(ctx, http.MethodGet, a.base+"/v1/idempotency/"+url.PathEscape(r.Key.String()), nil, nil)
	var answer struct {
		Status string `json:"status"`
		ID     string `json:"id"`
	}
	if err := decode(ex, detail, &answer); err != nil {
		return platform.Lookup{Result: platform.Unavailable, Detail: detail}
	}
	detail["answer"] = answer.Status
	switch {
	case answer.Status == "created" && answer.ID != "":
		return platform.Lookup{Result: platform.Found, ObjectID: answer.ID, Detail: detail}
	case answer.Status == "not_seen":
		return platform.Lookup{Result: platform.NotFound, ProvenNotSent: true, Detail: detail}
	}
	return platform.Lookup{Result: platform.Unavailable, Detail: detail}
}

func (a *adapter) listingLookup(ctx context.Context, r platform.Request) platform.Lookup {
	detail := map[string]any{"lookup": "listing"}
	u := a.base + "/v1/accounts/" + url.PathEscape(r.Account) + "/objects?key=" + url.QueryEscape(r.Key.String())
	ex := a.client.Do(ctx, http.MethodGet, u, nil, nil)
	var answer struct {
		Objects []object `json:"objects"`
	}
	if err := decode(ex, detail, &answer); err != nil {
		return platform.Lookup{Result: platform.Unavailable, Detail: detail}
	}
	detail["objects"] = len(answer.Objects)
	for _, o := range answer.Objects {
		if o.Key == r.Key.String() && o.ID != "" {
			return platform.Lookup{Result: platform.Found, ObjectID: o.ID, Detail: detail}
		}
	}
	return platform.Lookup{Result: platform.NotFound, Detail: detail}
}

// decode reads a 200 answer's JSON into v, noting the status and any error in detail.
func decode(ex transport.Exchange, detail map[string]any, v any) error {
	if ex.Status != 0 {
		detail["status"] = ex.Status
	}
	err := ex.Err
	if err == nil && ex.Status != http.StatusOK {
		err = fmt.Errorf("status %d", ex.Status)
	}
	if err == nil {
		err = json.Unmarshal(ex.Body, v)
	}
	if err != nil {
		detail["error"] = err.Error()
	}
	return err
}
