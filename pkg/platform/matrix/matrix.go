package matrix

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// Name is the platform name accounts served by this adapter carry (platform.Account.Platform).
const Name = "matrix"

// KeyField is the field of the event's content that carries the intent's delivery key: what
// the lookup searches the room's events for. Namespaced, as the specification asks of custom
// fields.
const KeyField = "io.atmost.delivery_key"

// DefinitiveStatuses are the statuses of a send that prove the homeserver created no event.
// Dendrite (clientapi/routing/sendevent.go, v0.13.8) answers every one of them before it
// hands the event to its roomserver: 400 (M_NOT_JSON, M_BAD_JSON, an unsupported room version,
// an invalid ts), 401 (M_MISSING_TOKEN, M_UNKNOWN_TOKEN, from its authentication wrapper), 403
// (M_FORBIDDEN: the account has not joined, or may not send), 404 (M_NOT_FOUND: no such room;
// M_UNRECOGNIZED: no such endpoint), 413 (M_TOO_LARGE: an event over 64 KiB); 429
// (M_LIMIT_EXCEEDED) is a refusal before any handler wherever a server or a proxy in front of
// it limits rates. A failure once the roomserver was asked is a 500: unknown. The slice is a copy.
func DefinitiveStatuses() []int { return slices.Clone(definitiveStatuses) }

var definitiveStatuses = []int{400, 401, 403, 404, 413, 429}

// adapter is the Matrix adapter opened for one account.
type adapter struct {
	account string
	cfg     config
	token   redactor          // the access token
	client  *transport.Client // every request: one per call, never replayed
}

// Open validates a's settings (Settings) and credential (the access token, read through
// platform.Account.Secret) and returns its adapter. It makes no network call. Every error
// about the settings or the credential wraps ErrInvalidSettings (or platform.ErrNoCredential
// when the reference names nothing), and none holds the credential.
func Open(a platform.Account) (platform.Adapter, error) {
	cfg, err := parseSettings(a.Settings)
	if err != nil {
		return nil, err
	}
	if a.CredentialRef == "" {
		return nil, invalid("the account has no credential reference: the access token must come from one (env:NAME or file:/path)")
	}
	token, err := a.Secret()
	if err != nil {
		return nil, fmt.Errorf("matrix: credential: %w", err)
	}
	switch {
	case token == "":
		return nil, invalid("the credential %s names is empty", a.CredentialRef)
	case strings.IndexFunc(token, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return nil, invalid("the credential %s names holds white space or a control character: not an access token", a.CredentialRef)
	}
	return &adapter{account: a.ID, cfg: cfg, token: redactor(token), client: transport.New(transport.Config{})}, nil
}

// Capabilities declare no status lookup: the lookup proves a message was sent when it finds
// it, never that one was not (see Lookup).
func (a *adapter) Capabilities() platform.Capabilities {
	return platform.Capabilities{
		DefinitiveStatuses:  slices.Clone(definitiveStatuses),
		ContractVersion:     a.cfg.contract,
		ReconcileDelay:      a.cfg.reconcileDelay,
		UnavailableStatuses: platform.DeclaredStatuses(platform.DefaultUnavailableStatuses(), definitiveStatuses),
		AuthStatuses:        platform.DeclaredStatuses(platform.DefaultAuthStatuses(), definitiveStatuses),
	}
}

// TxnID is the transaction id of the send for key: "atmost-" and the key's 64 hex digits. It
// is the same for every attempt of the intent.
func TxnID(key identity.DeliveryKey) string {
	return "atmost-" + strings.TrimPrefix(key.String(), "dk1:")
}

// post is the one action: its request.
type post struct {
	Text string `json:"text"`
	// InReplyTo is, for a reply (platform.Request.Reply), the event its parent created.
	InReplyTo string `json:"-"`
}

// parsePost reads r as a post: action "post", no target, request {"text": ...} and nothing
// else.
func parsePost(r platform.Request) (post, error) {
	var p post
	switch {
	case r.Action != "post":
		return p, badRequest("action %q: the matrix adapter sends only post", r.Action)
	case r.Target != "":
		return p, badRequest("target %q: a post goes to the account's room; the target must be empty", r.Target)
	}
	dec := json.NewDecoder(bytes.NewReader(r.Request))
	dec.DisallowUnknownFields()
	var raw struct {
		Text *string `json:"text"`
	}
	if err := dec.Decode(&raw); err != nil {
		return p, badRequest("request: %v", err)
	}
	if raw.Text == nil || *raw.Text == "" {
		return p, badRequest("request: text is required")
	}
	p.Text = *raw.Text
	if r.Reply != nil && r.Reply.ObjectID != "" {
		// A reply names its parent's event (m.relates_to m.in_reply_to); a lookup, which
		// knows no parent, finds the event by its key alone.
		if !strings.HasPrefix(r.Reply.ObjectID, "$") {
			return p, badRequest("reply_to: the parent's object %q is not a Matrix event id", r.Reply.ObjectID)
		}
		p.InReplyTo = r.Reply.ObjectID
	}
	return p, nil
}

// content is the event's content for r: a reply's names its parent's event (m.in_reply_to).
func (a *adapter) content(r platform.Request, p post) map[string]any {
	c := map[string]any{"msgtype": a.cfg.msgType, "body": p.Text, KeyField: r.Key.String()}
	if p.InReplyTo != "" {
		c["m.relates_to"] = map[string]any{"m.in_reply_to": map[string]string{"event_id": p.InReplyTo}}
	}
	return c
}

// roomPath is the client-server API's path of the account's room, with what follows.
func (a *adapter) roomPath(rest ...string) string {
	parts := append([]string{a.cfg.homeserver + "/_matrix/client/v3/rooms", url.PathEscape(a.cfg.roomID)}, rest...)
	return strings.Join(parts, "/")
}

// Prepare renders the send of r: PUT .../rooms/{room}/send/m.room.message/{TxnID(key)} with
// the content as its body (JSON, keys sorted). The same request gives the same bytes; the
// access token is not among the headers.
func (a *adapter) Prepare(r platform.Request) (platform.Prepared, error) {
	if r.Key.IsZero() {
		return platform.Prepared{}, badRequest("prepare: the request has no delivery key")
	}
	if r.Account != a.account {
		return platform.Prepared{}, fmt.Errorf("%w: the request is for account %q, the adapter for %q", ErrWrongAccount, r.Account, a.account)
	}
	p, err := parsePost(r)
	if err != nil {
		return platform.Prepared{}, fmt.Errorf("prepare %s: %w", r.Key, err)
	}
	body, err := json.Marshal(a.content(r, p))
	if err != nil {
		return platform.Prepared{}, fmt.Errorf("prepare %s: body: %w", r.Key, err)
	}
	header := map[string][]string{"Content-Type": {"application/json"}, "Accept": {"application/json"}}
	return platform.NewPrepared(r, http.MethodPut, a.roomPath("send", "m.room.message", TxnID(r.Key)), header, body), nil
}

// Send writes p once with the access token as Bearer and classifies the exchange by
// transport.Classify with DefinitiveStatuses: a 2xx naming the event (event_id) is Sent, with
// the event id as the object id.
func (a *adapter) Send(ctx context.Context, p platform.Prepared) platform.Outcome {
	if platform.NewPrepared(p.Request, p.Method, p.URL, p.Header, p.Body).Hash != p.Hash {
		return platform.Outcome{Result: platform.NotSent, Reason: platform.ReasonConnectionFailed,
			Detail: map[string]any{"step": "verify", "error": "matrix: the prepared request does not match its hash; nothing was sent"}}
	}
	ex := a.client.Do(ctx, p.Method, p.URL, a.authorized(p.Header), p.Body)
	out := transport.Classify(ex, definitiveStatuses, sentEventID)
	if ex.Status >= 400 {
		if e := parseError(ex.Body); e.Code != "" {
			out.Detail["errcode"] = e.Code
		}
	}
	out.Detail["txn_id"] = TxnID(p.Request.Key)
	o := platform.Outcome{Result: out.Result, ObjectID: out.ObjectID, Reason: out.Reason, Detail: a.redactDetail(out.Detail)}
	o.Signal = a.Capabilities().Signal(o)
	return o
}

// authorized is h with the access token added: a fresh header, never the prepared one.
func (a *adapter) authorized(h map[string][]string) http.Header {
	header := http.Header(h).Clone()
	if header == nil {
		header = http.Header{}
	}
	header.Set("Authorization", "Bearer "+string(a.token))
	return header
}

// sentEventID is the object id of a send's 2xx: its event_id.
func sentEventID(body []byte) (string, error) {
	var out struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return "", err
	}
	if !strings.HasPrefix(out.EventID, "$") {
		return "", fmt.Errorf("the answer's event_id %q is not an event id", out.EventID)
	}
	return out.EventID, nil
}

// matrixError is the body of an error response: {"errcode": ..., "error": ...}.
type matrixError struct {
	Code    string `json:"errcode"`
	Message string `json:"error"`
}

func parseError(body []byte) matrixError {
	var e matrixError
	_ = json.Unmarshal(body, &e)
	return e
}

// get makes one read of the API (safe to repeat: it creates nothing).
func (a *adapter) get(ctx context.Context, u string) transport.Exchange {
	return a.client.Do(ctx, http.MethodGet, u, a.authorized(map[string][]string{"Accept": {"application/json"}}), nil)
}

// event is a client event as the API serves it.
type event struct {
	EventID  string          `json:"event_id"`
	RoomID   string          `json:"room_id"`
	Sender   string          `json:"sender"`
	Type     string          `json:"type"`
	TS       int64           `json:"origin_server_ts"`
	Content  json.RawMessage `json:"content"`
	Unsigned struct {
		RedactedBecause json.RawMessage `json:"redacted_because"`
	} `json:"unsigned"`
}

// messageContent is the part of an m.room.message's content the adapter reads.
type messageContent struct {
	Body       *string `json:"body"`
	Key        string  `json:"io.atmost.delivery_key"`
	NewContent *struct {
		Body *string `json:"body"`
	} `json:"m.new_content"`
	RelatesTo *struct {
		RelType string `json:"rel_type"`
		EventID string `json:"event_id"`
	} `json:"m.relates_to"`
}

// redacted reports whether the event was redacted: the homeserver serves it with its content
// stripped (and, per the specification, unsigned.redacted_because).
func (e event) redacted() bool {
	var c map[string]json.RawMessage
	_ = json.Unmarshal(e.Content, &c)
	return len(e.Unsigned.RedactedBecause) > 0 || len(c) == 0
}

func (e event) message() messageContent {
	var c messageContent
	_ = json.Unmarshal(e.Content, &c)
	return c
}

// ReadBack reads the event objectID in the account's room and the latest edit of it by its
// sender: platform.ErrNotFound when the homeserver has no such event (404) or it was redacted
// (a deletion), another error when the homeserver could not tell. The Text is the latest
// edit's m.new_content body, else the event's body. An event that is not the one r describes
// (another room, sender, type or delivery key) reads back with a Text that says so, so that
// the comparison with the request's text fails.
func (a *adapter) ReadBack(ctx context.Context, r platform.Request, objectID string) (platform.Object, error) {
	fail := func(format string, args ...any) error {
		return redactedError{err: fmt.Errorf("matrix: read back %s: "+format, append([]any{objectID}, args...)...), token: a.token}
	}
	if !strings.HasPrefix(objectID, "$") {
		return platform.Object{}, fail("not an event id")
	}
	ex := a.get(ctx, a.roomPath("event", url.PathEscape(objectID)))
	switch {
	case ex.Status == 0:
		return platform.Object{}, fail("%w", ex.Err)
	case ex.Status == http.StatusNotFound:
		return platform.Object{}, fail("%w (%s)", platform.ErrNotFound, parseError(ex.Body).Code)
	case ex.Status < 200 || ex.Status > 299:
		return platform.Object{}, fail("status %d %s", ex.Status, parseError(ex.Body).Code)
	case ex.Err != nil:
		return platform.Object{}, fail("reading the body: %w", ex.Err)
	}
	var ev event
	if err := json.Unmarshal(ex.Body, &ev); err != nil {
		return platform.Object{}, fail("the response is not an event: %v", err)
	}
	if ev.redacted() {
		return platform.Object{}, fail("%w: the event was redacted", platform.ErrNotFound)
	}
	obj := platform.Object{ID: objectID}
	if diff := a.differs(r, ev); diff != "" {
		obj.Text = "[the event " + objectID + " is not the one requested: " + diff + "]"
		return obj, nil
	}
	obj.Text = *ev.message().Body
	edit, err := a.latestEdit(ctx, ev)
	if err != nil {
		return platform.Object{}, fail("its edits: %w", err)
	}
	if edit != nil {
		obj.Text = *edit
	}
	return obj, nil
}

// differs says how ev is not the message r describes, or "".
func (a *adapter) differs(r platform.Request, ev event) string {
	c := ev.message()
	switch {
	case ev.RoomID != a.cfg.roomID:
		return fmt.Sprintf("it is in room %s, not %s", ev.RoomID, a.cfg.roomID)
	case ev.Sender != a.cfg.userID:
		return fmt.Sprintf("its sender is %s, not %s", ev.Sender, a.cfg.userID)
	case ev.Type != "m.room.message":
		return fmt.Sprintf("its type is %s, not m.room.message", ev.Type)
	case c.Key != r.Key.String():
		return fmt.Sprintf("its delivery key is %q, not %s", c.Key, r.Key)
	case c.Body == nil:
		return "it has no body"
	}
	return ""
}

// latestEdit is the body of the latest edit (m.replace) ev's sender made of ev, or nil: the
// text a client shows. Edits by anyone else are not edits (the specification ignores them).
func (a *adapter) latestEdit(ctx context.Context, ev event) (*string, error) {
	u := a.cfg.homeserver + "/_matrix/client/v1/rooms/" + url.PathEscape(a.cfg.roomID) + "/relations/" +
		url.PathEscape(ev.EventID) + "/m.replace/m.room.message?limit=100&dir=b"
	ex := a.get(ctx, u)
	switch {
	case ex.Status == 0:
		return nil, ex.Err
	case ex.Status < 200 || ex.Status > 299:
		return nil, fmt.Errorf("relations: status %d %s", ex.Status, parseError(ex.Body).Code)
	case ex.Err != nil:
		return nil, fmt.Errorf("relations: reading the body: %w", ex.Err)
	}
	var out struct {
		Chunk []event `json:"chunk"`
	}
	if err := json.Unmarshal(ex.Body, &out); err != nil {
		return nil, fmt.Errorf("relations: %w", err)
	}
	var latest *event
	for i := range out.Chunk {
		e := &out.Chunk[i]
		c := e.message()
		if e.Sender != ev.Sender || e.redacted() || c.NewContent == nil || c.NewContent.Body == nil ||
			c.RelatesTo == nil || c.RelatesTo.RelType != "m.replace" || c.RelatesTo.EventID != ev.EventID {
			continue
		}
		// The latest by origin_server_ts, ties broken by the greater event id (the
		// specification's order for edits).
		if latest == nil || e.TS > latest.TS || (e.TS == latest.TS && e.EventID > latest.EventID) {
			latest = e
		}
	}
	if latest == nil {
		return nil, nil
	}
	return latest.message().NewContent.Body, nil
}

// Lookup pages the room's events backwards from the newest, lookup_events at most, for an
// m.room.message the account sent whose content carries r's delivery key. Found (with the
// event id) proves the message was sent; not found proves nothing (no StatusLookup): the event
// may be older than the window, or redacted since, which strips the key from its content.
func (a *adapter) Lookup(ctx context.Context, r platform.Request) platform.Lookup {
	want := r.Key.String()
	detail := map[string]any{"room_id": a.cfg.roomID, "txn_id": TxnID(r.Key), "window": a.cfg.lookupEvents}
	unavailable := func(format string, args ...any) platform.Lookup {
		detail["error"] = a.token.redact(fmt.Sprintf(format, args...))
		return platform.Lookup{Result: platform.Unavailable, Detail: detail}
	}
	filter, err := json.Marshal(map[string]any{"types": []string{"m.room.message"}, "senders": []string{a.cfg.userID}})
	if err != nil {
		return unavailable("filter: %v", err)
	}
	searched, from := 0, ""
	var found []string
	for searched < a.cfg.lookupEvents {
		q := url.Values{"dir": {"b"}, "limit": {fmt.Sprint(min(100, a.cfg.lookupEvents-searched))}, "filter": {string(filter)}}
		if from != "" {
			q.Set("from", from)
		}
		ex := a.get(ctx, a.roomPath("messages")+"?"+q.Encode())
		switch {
		case ex.Status == 0:
			return unavailable("messages: %v", ex.Err)
		case ex.Status < 200 || ex.Status > 299:
			detail["status"] = ex.Status
			if e := parseError(ex.Body); e.Code != "" {
				detail["errcode"] = e.Code
			}
			return unavailable("messages: status %d", ex.Status)
		case ex.Err != nil:
			return unavailable("messages: reading the body: %v", ex.Err)
		}
		var page struct {
			Chunk []event `json:"chunk"`
			End   string  `json:"end"`
		}
		if err := json.Unmarshal(ex.Body, &page); err != nil {
			return unavailable("messages: the response is not a page of events: %v", err)
		}
		for _, ev := range page.Chunk {
			searched++
			if ev.Type == "m.room.message" && ev.Sender == a.cfg.userID && !ev.redacted() &&
				ev.message().Key == want {
				found = append(found, ev.EventID)
			}
		}
		if len(page.Chunk) == 0 || page.End == "" || page.End == from {
			detail["reached_room_start"] = true
			break
		}
		from = page.End
	}
	detail["events_searched"] = searched
	if len(found) > 0 {
		if len(found) > 1 {
			detail["events_found"] = found
		}
		// Paged newest first: the last found is the oldest, the one the send created first.
		return platform.Lookup{Result: platform.Found, ObjectID: found[len(found)-1], Detail: detail}
	}
	detail["why"] = "not finding the key proves nothing: the event may be older than the window, or redacted since (which strips the key)"
	return platform.Lookup{Result: platform.NotFound, Detail: detail}
}

func (a *adapter) redactDetail(d map[string]any) map[string]any {
	for k, v := range d {
		if s, ok := v.(string); ok {
			d[k] = a.token.redact(s)
		}
	}
	return d
}
