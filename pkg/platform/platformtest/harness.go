package platformtest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/platform"
)

// Answer is how the platform answers the next create request. Each one is an ending of a send
// the transport's table classifies; together they are the endings a real platform produces.
type Answer string

const (
	// Accept creates the object and answers success, naming it.
	Accept Answer = "accept"
	// DropBeforeRead closes the connection before the platform reads the request: nothing is
	// created, but the request's bytes had left.
	DropBeforeRead Answer = "drop_before_read"
	// DropAfterCommit creates the object, then closes the connection without an answer.
	DropAfterCommit Answer = "drop_after_commit"
	// ErrorAfterCommit creates the object, then answers 500.
	ErrorAfterCommit Answer = "error_after_commit"
	// RateLimit answers 429 with Retry-After: nothing is created.
	RateLimit Answer = "rate_limit"
	// Refuse answers a status the adapter declares definitive (one of
	// Capabilities().DefinitiveStatuses other than 429): nothing is created.
	Refuse Answer = "refuse"
	// RefuseUndeclared answers a 4xx the adapter does not declare definitive (a 404 or 409):
	// nothing is created.
	RefuseUndeclared Answer = "refuse_undeclared"
	// Redirect answers 307 to a URL of the platform where a create request would be received
	// (and counted by Creates) like any other.
	Redirect Answer = "redirect"
	// SuccessWithoutID creates the object and answers 2xx without naming it.
	SuccessWithoutID Answer = "success_without_id"
	// Slow waits SlowBy, then creates the object and answers success, whether or not the client
	// is still there: a real platform commits what it received.
	Slow Answer = "slow"
)

// SlowBy is how long a Slow answer waits before the platform commits. The suite's send
// deadline in that case is a quarter of it.
const SlowBy = time.Second

// Platform is the platform one case runs against, as the adapter's test supplies it: a server
// the adapter reaches over real HTTP, which the suite steers and whose own record is the truth
// the adapter's claims are checked against. Its methods are safe for concurrent use.
type Platform interface {
	// Next sets how the platform answers the next create request; the ones after it are
	// answered with Accept.
	Next(a Answer)
	// Creates returns the body of every create request that reached the platform, in arrival
	// order, as far as the platform read it (nil for one it dropped before reading). A create
	// at a redirect's target counts.
	Creates() [][]byte
	// Requests is how many requests of any kind reached the platform: creates, reads, lookups
	// and session calls.
	Requests() int
	// Objects returns the ids of the objects the create requests for r created, oldest first,
	// deleted ones included.
	Objects(r platform.Request) []string
	// Edit replaces the text the object holds, as an edit on the platform would.
	Edit(id, text string)
	// Delete removes the object, as the account or a moderator would: reads of it find
	// nothing. A status lookup still answers for the request that created it.
	Delete(id string)
	// Down stops the platform: every later connection is refused.
	Down()
	// Secrets are what must never appear in anything the adapter returns: the credential, and
	// the tokens the platform issued so far.
	Secrets() []string
}

// Harness is what an adapter's test gives the suite.
type Harness struct {
	// Open starts a fresh platform, answering Accept, and opens the adapter under test against
	// it; both are closed by t's cleanup. A clock the adapter's Prepare reads must stand still.
	Open func(t *testing.T) (platform.Adapter, Platform)
	// Request returns a request of the opened adapter's account whose read-back text is text.
	// Distinct texts give distinct delivery keys. Post builds one for an adapter that takes a
	// post with a text.
	Request func(t *testing.T, text string) platform.Request
	// Exceptions are the clauses the adapter is known to break, by the case's name
	// ("Group/case"), with why. Such a case is skipped with that reason; a name that is no
	// case fails the suite.
	Exceptions map[string]string
}

// Post is a "post" of text on account, with no target, as ingest hands it to the dispatcher:
// the delivery key derived from the envelope, the normalized text.
func Post(t testing.TB, account, text string) platform.Request {
	t.Helper()
	req, err := json.Marshal(map[string]string{"text": text})
	if err != nil {
		t.Fatalf("platformtest: the request of %q: %v", text, err)
	}
	e, err := identity.NewEnvelope(account, "post", "", req, "", nil)
	if err != nil {
		t.Fatalf("platformtest: the envelope of %q: %v", text, err)
	}
	got, _ := e.Text()
	return platform.Request{Key: e.DeliveryKey(), Account: e.Account, Action: e.Action, Target: e.Target,
		Request: e.Request, Text: identity.NormalizeText(got)}
}
