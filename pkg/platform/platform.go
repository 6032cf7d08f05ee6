// Package platform is the boundary where bytes leave atmost: the interface every platform
// adapter implements, and the vocabulary of what a send, a read-back and a lookup can report.
//
// An adapter never retries a send, never follows a redirect with a body, and never reports
// NotSent unless it can prove that no byte of the request left the machine or that the platform
// refused it definitively. Anything it cannot prove is Unknown: the intent becomes
// indeterminate and is reconciled by one lookup, never resent.
package platform

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"time"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/identity"
)

// Result is what the transport says happened to one send: atmosttype's TransportResult,
// which the ledger records as it is.
type Result = atmosttype.TransportResult

// The results of a send.
const (
	// Sent: the platform answered that it created the object, and named it.
	Sent = atmosttype.Sent
	// NotSent: PROVED nothing was created: no byte left (the connection failed first) or the
	// platform refused definitively (a status the adapter declares definitive).
	NotSent = atmosttype.NotSent
	// Unknown: anything else. Bytes may have left and no answer proves what happened.
	Unknown = atmosttype.Unknown
)

// Reason says why a send ended as it did: one of atmosttype's reasons, the three below.
type Reason = atmosttype.Reason

// The reasons a send may report.
const (
	ReasonConnectionFailed = atmosttype.ReasonConnectionFailed // refused, DNS or TLS failure before any byte
	ReasonPlatformRejected = atmosttype.ReasonPlatformRejected // a definitive refusal (the adapter's list)
	ReasonSendUnknown      = atmosttype.ReasonSendUnknown      // timeout or reset after bytes left; 5xx; no object id
)

// Request is one intent as an adapter sends it: what the producer asked for, after ingest
// validated and canonicalized it.
type Request struct {
	Key     identity.DeliveryKey
	Account string
	Action  string
	Target  string
	// Request is the canonical JSON of the request projection (for a post: {"text": ...}).
	Request json.RawMessage
	// Text is the normalized text of the request ("" when the action carries none): what the
	// read-back must find.
	Text string
	// Reply is set for a reply (envelope reply_to, Target ""): the parent it answers, which
	// the adapter renders as its platform's reply. nil for every other request.
	Reply *Reply
}

// Reply is what a reply's adapter knows of its parent.
type Reply struct {
	// Parent is the parent intent's delivery key.
	Parent identity.DeliveryKey
	// ObjectID is the object the parent created: the dispatcher sends a reply only once its
	// parent is published, and sets it then. "" where it is not known (the reconciler's
	// lookup, which finds the reply by its own key).
	ObjectID string
	// Refs is what a ReplyResolver read of the parent on its platform (adapter-specific
	// JSON: Bluesky's parent and root strong references), nil until it has.
	Refs json.RawMessage
}

// ReplyResolver is implemented by adapters that need more of a reply's parent than its object
// id to render the reply (Bluesky: the parent's and the thread root's uri and cid). ResolveReply
// reads it from the platform, a read that creates nothing and may be repeated, and returns r
// with Reply.Refs set, for Prepare. The dispatcher resolves before it prepares and before it
// begins the attempt, so a failed read opens no attempt: the work waits and is resolved again.
// An error wrapping ErrUnsendable says no later try can succeed.
type ReplyResolver interface {
	ResolveReply(ctx context.Context, r Request) (Request, error)
}

// Prepared is a request rendered to the exact bytes that will go on the wire. Its Hash is
// bound to the attempt by Begin, and Authorize refuses any other, so what was authorized is
// what is sent.
type Prepared struct {
	Request Request
	// Method, URL, Header and Body are the wire request. Header never holds a credential:
	// the adapter adds those at send time.
	Method string
	URL    string
	Header map[string][]string
	Body   []byte
	// Hash is identity-independent: sha256 over method, URL, sorted headers and body.
	Hash [32]byte
}

// Outcome is what Send reports.
type Outcome struct {
	Result Result
	// ObjectID names the created object (Sent).
	ObjectID string
	// Reason is set for NotSent and Unknown.
	Reason Reason
	// Detail is kept with the attempt's evidence: status code, error text, which step of the
	// exchange was reached. Never a credential or a request body.
	Detail map[string]any
	// Signal is what a NotSent outcome says about the account's platform, fed to its health
	// (docs/design.md#account-health): Capabilities.Signal of the outcome, which the adapter
	// sets from its own classification. "" for every other result (the ledger derives it).
	Signal Signal
}

// Signal is what a definitive ending of a send says about the account's platform: atmosttype's
// Signal, which the ledger's health reads as it is.
type Signal = atmosttype.Signal

// The signals an adapter declares.
const (
	// SignalOK: the platform is up: it refused this request for what it is.
	SignalOK = atmosttype.SignalOK
	// SignalUnavailable: the platform cannot take anything now (connection refused, DNS or TLS
	// failure, a status of Capabilities.UnavailableStatuses).
	SignalUnavailable = atmosttype.SignalUnavailable
	// SignalAuth: the platform refused the credential (a status of Capabilities.AuthStatuses).
	SignalAuth = atmosttype.SignalAuth
)

// DefaultUnavailableStatuses returns the statuses an adapter declares, unless it knows its
// platform better, as saying the platform cannot take anything now (429 and 503; a new slice at
// each call). Of them, an adapter declares those that are also its definitive statuses
// (DeclaredStatuses).
func DefaultUnavailableStatuses() []int { return atmosttype.DefaultUnavailableStatuses() }

// DefaultAuthStatuses returns the statuses an adapter declares, unless it knows its platform
// better, as refusing the credential (401 and 403; a new slice at each call).
func DefaultAuthStatuses() []int { return atmosttype.DefaultAuthStatuses() }

// DeclaredStatuses are the statuses of declared that are also definitive: what an adapter whose
// definitive statuses are configurable declares as UnavailableStatuses or AuthStatuses.
func DeclaredStatuses(declared, definitive []int) []int {
	out := []int{}
	for _, s := range declared {
		if slices.Contains(definitive, s) {
			out = append(out, s)
		}
	}
	return out
}

// Signal is what o says about the platform by c's declaration: for a NotSent outcome,
// SignalUnavailable when no connection was made or its status is one of UnavailableStatuses,
// SignalAuth for one of AuthStatuses, SignalOK for any other refusal; "" for any other result.
// A status counts only when it is also definitive (only a definitive status is NotSent).
func (c Capabilities) Signal(o Outcome) Signal {
	if o.Result != NotSent {
		return ""
	}
	status, _ := o.Detail["status"].(int)
	switch {
	case status == 0 && o.Reason == ReasonConnectionFailed:
		return SignalUnavailable
	case status != 0 && slices.Contains(c.AuthStatuses, status):
		return SignalAuth
	case status != 0 && slices.Contains(c.UnavailableStatuses, status):
		return SignalUnavailable
	}
	return SignalOK
}

// Object is what a read-back found.
type Object struct {
	ID string
	// Text is the object's text as the platform stores it, before normalization.
	Text string
}

// LookupResult is what the one reconciliation lookup found: atmosttype's LookupResult, of
// which an adapter reports these three (a proven not-sent is a NotFound with ProvenNotSent).
type LookupResult = atmosttype.LookupResult

// The results of a lookup an adapter reports.
const (
	Found       = atmosttype.Found
	NotFound    = atmosttype.NotFound
	Unavailable = atmosttype.Unavailable
)

// Lookup is what the reconciliation lookup reports.
type Lookup struct {
	Result LookupResult
	// ObjectID names the object found (Found).
	ObjectID string
	// ProvenNotSent is set with NotFound only when the platform's idempotency-status lookup
	// answered for the original request (Capabilities.StatusLookup): then, after the
	// reconcile delay, nothing was created. A NotFound without it proves nothing.
	ProvenNotSent bool
	Detail        map[string]any
}

// Capabilities are what an adapter declares about its platform.
type Capabilities struct {
	// StatusLookup: the platform answers, for the original request's key, whether it created
	// anything, so a lookup can prove not-sent as well as published.
	StatusLookup bool
	// DefinitiveStatuses are the HTTP statuses that prove the platform created nothing.
	DefinitiveStatuses []int
	// ContractVersion names the platform API contract the adapter speaks; Authorize refuses a
	// send when an account pinned another.
	ContractVersion string
	// ReconcileDelay is how long after a send's deadline a lookup is meaningful: requests
	// still in flight inside the platform must have landed.
	ReconcileDelay time.Duration
	// ConfirmedByResponse: the account takes a Sent outcome (a success naming the object) as
	// the proof, for a platform that offers no read-back. The dispatcher then reads nothing
	// back and the intent is published under its own reason (published_unread), so history
	// shows that the text was never compared.
	ConfirmedByResponse bool
	// UnavailableStatuses are the definitive statuses that say the platform cannot take
	// anything now (its account holds and is probed), AuthStatuses those that refuse the
	// credential (its account holds until an operator acts). Each must be one of
	// DefinitiveStatuses; platformtest checks it.
	UnavailableStatuses []int
	AuthStatuses        []int
}

// ErrNotFound is what ReadBack returns when the platform has no such object.
var ErrNotFound = errors.New("platform: object not found")

// ErrNoReadBack is what ReadBack returns (wrapped) when the adapter cannot read objects back
// at all: a success then cannot be confirmed, and the intent goes indeterminate.
var ErrNoReadBack = errors.New("platform: no read-back is possible")

// ErrUnsendable is what Prepare wraps when the request itself cannot be rendered for the
// platform (an action it does not know, a field it needs missing or malformed): no change of
// configuration will make it sendable, so the dispatcher parks the intent for a human instead
// of waiting. Any other Prepare error is taken for a configuration to fix, and the work waits.
var ErrUnsendable = errors.New("platform: the request cannot be sent to this platform")

// Adapter is one platform, opened for one account.
type Adapter interface {
	// Capabilities are fixed for the adapter's life.
	Capabilities() Capabilities
	// Prepare renders the wire request. It sends nothing and may be called any number of
	// times. The dispatcher prepares once per attempt, binds the Prepared's hash in Begin and
	// sends exactly those bytes, so a Prepared may carry the moment it was made (a record's
	// creation time); a Request the platform cannot render fails with ErrUnsendable.
	Prepare(r Request) (Prepared, error)
	// Send writes the prepared request once, with every automatic retry off, and classifies
	// what happened. It sends no byte after ctx's deadline.
	Send(ctx context.Context, p Prepared) Outcome
	// ReadBack fetches the object by id: ErrNotFound when the platform has none, another error
	// when it could not tell.
	ReadBack(ctx context.Context, r Request, objectID string) (Object, error)
	// Lookup is the one reconciliation lookup for r, made at most once per indeterminate
	// intent.
	Lookup(ctx context.Context, r Request) Lookup
}

// Stager is implemented by adapters whose send needs something put on the platform first
// (Bluesky's images: uploadBlob). Stage does it for r, the request Prepare rendered, and may be
// called any number of times: what it puts creates nothing a person sees until the send
// references it. The dispatcher stages before it begins the attempt, so a Stage that fails
// sends nothing and opens no attempt: the work waits and is staged again. An error wrapping
// ErrUnsendable says no later try can succeed (the request is parked for a human).
type Stager interface {
	Stage(ctx context.Context, r Request) error
}

// ReadItem names one object to read back: the request it should answer and the id the
// platform gave it.
type ReadItem struct {
	Request  Request
	ObjectID string
}

// ReadResult is one item's answer from ReadBackMany: the object, or an error as ReadBack
// would return it (ErrNotFound when the platform has none).
type ReadResult struct {
	Object Object
	Err    error
}

// ManyReader is implemented by adapters whose platform reads several objects in one request.
// Reads are safe to repeat and send nothing, so grouping them changes no promise: the
// dispatcher reads the objects of many sends at once, and reads one by one only what a
// grouped read could not tell.
type ManyReader interface {
	// ReadBackMany reads items, in as few requests as the platform allows, and returns one
	// result per item, in order. An item's result means what ReadBack's would.
	ReadBackMany(ctx context.Context, items []ReadItem) []ReadResult
}

// Account is the operator's configuration of one account, as an adapter needs it.
type Account struct {
	ID       string
	Platform string
	// Settings are the adapter's own settings for the account (JSON).
	Settings json.RawMessage
	// CredentialRef says where the credential lives (see ResolveCredential); the credential
	// itself never enters the ledger.
	CredentialRef     string
	CredentialVersion int64
	// Credential, when set, reads the credential instead of ResolveCredential(CredentialRef)
	// (see Secret): a check that opens the adapter only to validate the account, sending
	// nothing, reads the reference where the check runs, or gives a stand-in where it cannot
	// be read there, so the settings are still checked. Roles leave it nil.
	Credential func() (string, error)
}

// NewPrepared returns the prepared request with its hash: sha256 over the length-prefixed
// method, URL, header lines (sorted by name, values in order) and body.
func NewPrepared(r Request, method, url string, header map[string][]string, body []byte) Prepared {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field([]byte("atmost.wire.v1"))
	field([]byte(method))
	field([]byte(url))
	names := make([]string, 0, len(header))
	for name := range header {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, v := range header[name] {
			field([]byte(name))
			field([]byte(v))
		}
	}
	field(body)
	p := Prepared{Request: r, Method: method, URL: url, Header: header, Body: body}
	copy(p.Hash[:], h.Sum(nil))
	return p
}
