package bluesky

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/atmost/atmost/pkg/platform"
	"github.com/atmost/atmost/pkg/platform/transport"
)

// Name is the platform name accounts served by this adapter carry (platform.Account.Platform).
const Name = "bluesky"

// DefinitiveStatuses are the statuses of a createRecord that prove the PDS created nothing:
// the XRPC server answers them before the handler writes (400 InvalidRequest, ExpiredToken,
// InvalidToken, ...; 401 AuthenticationRequired; 403 Forbidden; 413 PayloadTooLarge; 429
// RateLimitExceeded) or the handler refuses inside its transaction (400 InvalidSwap,
// ConcurrentWrites, an invalid record). A 400 that says the record already exists is not
// definitive (see Send). The slice is a copy.
func DefinitiveStatuses() []int { return slices.Clone(definitiveStatuses) }

var definitiveStatuses = []int{400, 401, 403, 413, 429}

// adapter is the Bluesky adapter opened for one account.
type adapter struct {
	account  string
	cfg      config
	sessions *sessions
	client   *transport.Client // createRecord and getRecord: one request per call, never replayed
	media    *http.Client      // the images' fetches, as cfg.media allows
	now      func() time.Time
}

// Open validates a's settings (Settings) and credential (the app password, read through
// platform.Account.Secret) and returns its adapter. It makes no network call: the session
// is created by the first send. Every error about the settings or the credential wraps
// ErrInvalidSettings (or platform.ErrNoCredential when the reference names nothing), and none
// holds the credential.
func Open(a platform.Account) (platform.Adapter, error) {
	cfg, err := parseSettings(a.Settings)
	if err != nil {
		return nil, err
	}
	if a.CredentialRef == "" {
		return nil, invalid("the account has no credential reference: the app password must come from one (env:NAME or file:/path)")
	}
	password, err := a.Secret()
	if err != nil {
		return nil, fmt.Errorf("bluesky: credential: %w", err)
	}
	if password == "" {
		return nil, invalid("the credential %s names is empty", a.CredentialRef)
	}
	ad := &adapter{account: a.ID, cfg: cfg, client: transport.New(transport.Config{}), media: cfg.media.client(), now: time.Now}
	ad.sessions = newSessions(cfg, password, func() time.Time { return ad.now() })
	return ad, nil
}

// Capabilities declare no status lookup: a getRecord under the intent's record key proves a
// record is there, but its absence cannot tell a create that never landed from a record deleted
// since (see Lookup), so a not-found must go to a person.
func (a *adapter) Capabilities() platform.Capabilities {
	return platform.Capabilities{
		DefinitiveStatuses:  slices.Clone(definitiveStatuses),
		ContractVersion:     a.cfg.contract,
		ReconcileDelay:      a.cfg.reconcileDelay,
		UnavailableStatuses: platform.DeclaredStatuses(platform.DefaultUnavailableStatuses(), definitiveStatuses),
		AuthStatuses:        platform.DeclaredStatuses(platform.DefaultAuthStatuses(), definitiveStatuses),
	}
}

// createRecordInput is the input of com.atproto.repo.createRecord.
type createRecordInput struct {
	Repo       string `json:"repo"`
	Collection string `json:"collection"`
	Rkey       string `json:"rkey"`
	Record     any    `json:"record"`
}

// Prepare renders the createRecord call for r: the record its action describes, under the
// record key RecordKey(r.Key), in the repository of the account's identifier, with createdAt
// the time of this call. createdAt is part of the body and so of the hash: two Prepares of one
// request differ in it. That is safe because the dispatcher prepares once per attempt, binds
// that hash to the attempt, and sends those very bytes; the delivery key, and so the record
// key, never depends on it. The credential is not among the headers.
func (a *adapter) Prepare(r platform.Request) (platform.Prepared, error) {
	if r.Key.IsZero() {
		return platform.Prepared{}, badRequest("prepare: the request has no delivery key")
	}
	if r.Account != a.account {
		return platform.Prepared{}, fmt.Errorf("%w: the request is for account %q, the adapter for %q", ErrWrongAccount, r.Account, a.account)
	}
	in, err := parseIntent(r)
	if err == nil && in.reply && in.parent == nil {
		err = errors.New("a reply whose parent's references were not read (ResolveReply)")
	}
	if err == nil {
		err = a.checkImages(in.images)
	}
	if err != nil {
		return platform.Prepared{}, fmt.Errorf("prepare %s: %w", r.Key, err)
	}
	createdAt := a.now().UTC().Format("2006-01-02T15:04:05.000Z")
	body, err := marshal(createRecordInput{Repo: a.cfg.identifier, Collection: in.collection, Rkey: RecordKey(r.Key), Record: in.record(createdAt)})
	if err != nil {
		return platform.Prepared{}, fmt.Errorf("prepare %s: body: %w", r.Key, err)
	}
	header := map[string][]string{"Content-Type": {"application/json"}, "Accept": {"application/json"}}
	return platform.NewPrepared(r, http.MethodPost, a.cfg.pds+"/xrpc/"+methodCreateRecord, header, body), nil
}

// Send makes sure a session is held (createSession once, refreshSession when the access token
// expires: neither creates anything, so they may be repeated), then writes p once with the
// access token as Bearer, and classifies the exchange by transport.Classify with
// DefinitiveStatuses: a 2xx naming the record (uri and cid) is Sent, with the at-uri as the
// object id. Two refusals are read more closely:
//   - a 4xx whose XRPC error says the record already exists is Unknown, never NotSent: a record
//     under this intent's key exists, so an earlier attempt created it (the reconciler's lookup
//     will find it);
//   - a refusal of the token (400 ExpiredToken or InvalidToken, 401) stays NotSent, and the
//     session is renewed before the next send.
//
// A session that cannot be had is NotSent: no byte of the createRecord left.
func (a *adapter) Send(ctx context.Context, p platform.Prepared) platform.Outcome {
	if platform.NewPrepared(p.Request, p.Method, p.URL, p.Header, p.Body).Hash != p.Hash {
		return platform.Outcome{Result: platform.NotSent, Reason: platform.ReasonConnectionFailed,
			Detail: map[string]any{"step": "verify", "error": "bluesky: the prepared request does not match its hash; nothing was sent"}}
	}
	sess, err := a.sessions.get(ctx)
	if err != nil {
		return a.sessionFailed(err)
	}
	header := http.Header(p.Header).Clone()
	if header == nil {
		header = http.Header{}
	}
	header.Set("Authorization", "Bearer "+sess.access)
	ex := a.client.Do(ctx, p.Method, p.URL, header, p.Body)
	out := transport.Classify(ex, definitiveStatuses, createdURI)
	if ex.Status >= 400 {
		x := parseXRPCError(ex.Body)
		if x.Name != "" {
			out.Detail["xrpc_error"] = x.Name
		}
		switch {
		case ex.Status < 500 && recordExists(x):
			out.Result, out.Reason = platform.Unknown, platform.ReasonSendUnknown
			out.Detail["case"] = "a record already exists under the intent's record key: an earlier attempt created it"
			out.Detail["rkey_conflict"] = true
		case sessionRefused(ex.Status, x):
			a.sessions.markStale(sess.access)
		}
	}
	if in, err := parseIntent(p.Request); err == nil {
		out.Detail["collection"] = in.collection
	}
	out.Detail["rkey"] = RecordKey(p.Request.Key)
	if out.Result == platform.Sent {
		if u, err := parseATURI(out.ObjectID); err == nil && u.rkey != RecordKey(p.Request.Key) {
			out.Detail["rkey_mismatch"] = "the PDS created the record under another key than the one sent: its lookups will not find it"
		}
	}
	out.Detail = a.redactDetail(out.Detail, sess)
	out.Signal = a.Capabilities().Signal(out)
	return out
}

// sessionFailed is the outcome of a send that could not get a session: nothing was sent.
func (a *adapter) sessionFailed(err error) platform.Outcome {
	detail := map[string]any{"step": "session", "error": a.secrets(nil).redact(err.Error())}
	reason := platform.ReasonConnectionFailed
	var se *sessionError
	if errors.As(err, &se) {
		detail["session_call"] = se.call
		if se.status != 0 {
			detail["status"] = se.status
			reason = platform.ReasonPlatformRejected
		}
		if se.xrpc.Name != "" {
			detail["xrpc_error"] = se.xrpc.Name
		}
	}
	return platform.Outcome{Result: platform.NotSent, Reason: reason, Detail: detail, Signal: sessionSignal(detail)}
}

// sessionSignal is what a session call that failed says about the PDS: the createRecord never
// left, so every status of the session call is definitive: 401 and 403 refuse the credential,
// 429 and any 5xx say the PDS cannot take anything now, no answer at all says the same.
func sessionSignal(detail map[string]any) platform.Signal {
	status, _ := detail["status"].(int)
	switch {
	case status == 0 || status == 429 || status >= 500:
		return platform.SignalUnavailable
	case slices.Contains(platform.DefaultAuthStatuses(), status):
		return platform.SignalAuth
	}
	return platform.SignalOK
}

// createdURI is the object id of a createRecord's 2xx: the record's at-uri, when the body is
// the documented output (uri and cid).
func createdURI(body []byte) (string, error) {
	var out struct {
		URI string `json:"uri"`
		CID string `json:"cid"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return "", err
	}
	if out.CID == "" {
		return "", errors.New("the output has no cid")
	}
	if _, err := parseATURI(out.URI); err != nil {
		return "", err
	}
	return out.URI, nil
}

// getRecordOutput is the output of com.atproto.repo.getRecord.
type getRecordOutput struct {
	URI   string          `json:"uri"`
	CID   string          `json:"cid"`
	Value json.RawMessage `json:"value"`
}

// getRecord reads one record (a read: safe to repeat, no credential needed).
func (a *adapter) getRecord(ctx context.Context, repo, collection, rkey string) transport.Exchange {
	q := url.Values{"repo": {repo}, "collection": {collection}, "rkey": {rkey}}
	return a.client.Do(ctx, http.MethodGet, a.cfg.pds+"/xrpc/"+methodGetRecord+"?"+q.Encode(),
		http.Header{"Accept": {"application/json"}}, nil)
}

// ReadBack reads the record objectID (an at-uri) with getRecord: platform.ErrNotFound on 400
// RecordNotFound, another error when the PDS could not tell. The object's Text is the post's
// text for post, reply and quote, and "" for like, repost and follow (what
// platforms.RequestOf gives as their text). A record that is not the one r describes (another
// type, subject, parent, root or quoted record) reads back with a Text that describes the
// difference, so that the comparison with the request's text fails.
func (a *adapter) ReadBack(ctx context.Context, r platform.Request, objectID string) (platform.Object, error) {
	u, err := parseATURI(objectID)
	if err != nil {
		return platform.Object{}, fmt.Errorf("bluesky: read back: %w", err)
	}
	in, err := parseIntent(r)
	if err != nil {
		return platform.Object{}, fmt.Errorf("bluesky: read back %s: %w", objectID, err)
	}
	ex := a.getRecord(ctx, u.authority, u.collection, u.rkey)
	fail := func(format string, args ...any) error {
		return redactedError{err: fmt.Errorf("bluesky: read back %s: "+format, append([]any{objectID}, args...)...), secrets: a.secrets(nil)}
	}
	x := parseXRPCError(ex.Body)
	switch {
	case ex.Status == 0:
		return platform.Object{}, fail("%w", ex.Err)
	case ex.Status == http.StatusBadRequest && x.Name == errRecordNotFound:
		return platform.Object{}, fail("%w", platform.ErrNotFound)
	case ex.Status < 200 || ex.Status > 299:
		return platform.Object{}, fail("status %d %s", ex.Status, x.Name)
	case ex.Err != nil:
		return platform.Object{}, fail("reading the body: %w", ex.Err)
	}
	var out getRecordOutput
	var stored storedRecord
	if err := json.Unmarshal(ex.Body, &out); err != nil {
		return platform.Object{}, fail("the response is not a record: %v", err)
	}
	if err := json.Unmarshal(out.Value, &stored); err != nil {
		return platform.Object{}, fail("the record's value: %v", err)
	}
	obj := platform.Object{ID: objectID}
	switch diff := in.differs(stored); {
	case diff != "":
		obj.Text = "[the record at " + objectID + " is not the one requested: " + diff + "]"
	case in.collection == collectionPost:
		obj.Text = stored.Text
	}
	return obj, nil
}

// ResolveReply reads a reply's parent (r.Reply.ObjectID, its at-uri) with getRecord, and returns
// r with the reply references Prepare renders: the parent's uri and cid, and the thread's root,
// which is the parent's own root when the parent is itself a reply, else the parent. A read,
// safe to repeat. A parent the PDS does not hold (400 RecordNotFound: deleted since it was
// published) can never be answered: ErrUnsendable.
func (a *adapter) ResolveReply(ctx context.Context, r platform.Request) (platform.Request, error) {
	if r.Reply == nil {
		return r, nil
	}
	u, err := parseATURI(r.Reply.ObjectID)
	if err != nil {
		return r, fmt.Errorf("bluesky: reply to %s: %w: %w", r.Reply.Parent, err, platform.ErrUnsendable)
	}
	ex := a.getRecord(ctx, u.authority, u.collection, u.rkey)
	x := parseXRPCError(ex.Body)
	switch {
	case ex.Status == 0:
		return r, fmt.Errorf("bluesky: reading the parent %s: %w", r.Reply.ObjectID, ex.Err)
	case ex.Status == http.StatusBadRequest && x.Name == errRecordNotFound:
		return r, fmt.Errorf("bluesky: the parent %s is not on the PDS any more: %w", r.Reply.ObjectID, platform.ErrUnsendable)
	case ex.Status < 200 || ex.Status > 299 || ex.Err != nil:
		return r, fmt.Errorf("bluesky: reading the parent %s: status %d %s", r.Reply.ObjectID, ex.Status, x.Name)
	}
	var out getRecordOutput
	var stored storedRecord
	if err := json.Unmarshal(ex.Body, &out); err != nil || json.Unmarshal(out.Value, &stored) != nil || out.CID == "" {
		return r, fmt.Errorf("bluesky: the parent %s: the response is not a record", r.Reply.ObjectID)
	}
	refs := replyRef{Parent: strongRef{URI: out.URI, CID: out.CID}}
	refs.Root = refs.Parent
	if stored.Reply != nil {
		refs.Root = stored.Reply.Root
	}
	b, err := marshal(refs)
	if err != nil {
		return r, err
	}
	reply := *r.Reply
	reply.Refs = b
	r.Reply = &reply
	return r, nil
}

// Lookup is getRecord of the record key derived from r's delivery key, in the account's
// repository and r's collection: 200 naming the record is Found (its at-uri), 400
// RecordNotFound is NotFound, anything else is Unavailable. NotFound is never ProvenNotSent:
// the PDS answers from the repository as it is now, where a record the lost request created
// and someone deleted since (the account, a moderator's takedown, the duplicate-backlink rule
// of another intent's like, repost or follow) is as absent as one never created, and it keeps
// no history a lookup could check instead (see the package comment). The repository is named
// by its DID (from the identifier, or the session when the identifier is a handle: a handle
// can move to another account, whose PDS would answer for the wrong repository).
func (a *adapter) Lookup(ctx context.Context, r platform.Request) platform.Lookup {
	unavailable := func(detail map[string]any) platform.Lookup {
		return platform.Lookup{Result: platform.Unavailable, Detail: a.redactDetail(detail, session{})}
	}
	in, err := parseIntent(r)
	if err != nil {
		return unavailable(map[string]any{"error": err.Error()})
	}
	rkey := RecordKey(r.Key)
	did := a.sessions.did()
	if did == "" {
		sess, err := a.sessions.get(ctx)
		if err != nil {
			return unavailable(map[string]any{"step": "session", "error": err.Error()})
		}
		did = sess.did
	}
	ex := a.getRecord(ctx, did, in.collection, rkey)
	x := parseXRPCError(ex.Body)
	detail := map[string]any{"step": string(ex.Step), "repo": did, "collection": in.collection, "rkey": rkey}
	if ex.Status != 0 {
		detail["status"] = ex.Status
	}
	if x.Name != "" {
		detail["xrpc_error"] = x.Name
	}
	if ex.Err != nil {
		detail["error"] = ex.Err.Error()
	}
	switch {
	case ex.Status == http.StatusBadRequest && x.Name == errRecordNotFound:
		detail["why"] = "RecordNotFound proves nothing: a record the send created and someone deleted since reads the same"
		return platform.Lookup{Result: platform.NotFound, Detail: a.redactDetail(detail, session{})}
	case ex.Status >= 200 && ex.Status <= 299 && ex.Err == nil:
		var out getRecordOutput
		if err := json.Unmarshal(ex.Body, &out); err != nil {
			detail["error"] = "the response is not a record: " + err.Error()
			return unavailable(detail)
		}
		want := atURI{did, in.collection, rkey}.String()
		if out.URI != want {
			detail["error"] = fmt.Sprintf("the PDS answered for %q, not %q", out.URI, want)
			return unavailable(detail)
		}
		return platform.Lookup{Result: platform.Found, ObjectID: out.URI, Detail: a.redactDetail(detail, session{})}
	}
	return unavailable(detail)
}

// secrets are the app password and the tokens of sess and of the session held.
func (a *adapter) secrets(sess *session) secrets {
	ss := secrets{a.sessions.password}
	for _, c := range []*session{sess, a.sessions.current()} {
		if c != nil {
			ss = append(ss, c.access, c.refresh)
		}
	}
	return ss
}

func (a *adapter) redactDetail(d map[string]any, sess session) map[string]any {
	ss := a.secrets(&sess)
	for k, v := range d {
		if s, ok := v.(string); ok {
			d[k] = ss.redact(s)
		}
	}
	return d
}
