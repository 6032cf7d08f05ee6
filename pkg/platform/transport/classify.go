package transport

import (
	"fmt"
	"maps"
	"slices"

	"github.com/atmost/atmost/pkg/platform"
)

// Case is one kind of ending of a send exchange.
type Case string

// The cases, in the order of the table in docs/design.md#what-a-sends-ending-proves.
const (
	CaseNoConnection     Case = "no connection obtained (refused, DNS, TLS handshake, deadline before connecting)"
	CaseErrorAfterConn   Case = "error once a connection was held (timeout, reset, EOF, deadline)"
	CaseSuccessWithID    Case = "2xx naming the created object"
	CaseSuccessWithoutID Case = "2xx without an object id, or an unreadable body"
	CaseRedirect         Case = "3xx (never followed)"
	CaseDefinitive       Case = "a status the adapter declares definitive (default 400, 401, 403, 413, 422, 429)"
	CaseOther4xx         Case = "any other 4xx (404, 408, 409, ...)"
	CaseServerError      Case = "5xx"
	CaseOtherStatus      Case = "any other status"
)

// Cases lists every case, in table order; the slice is a copy.
func Cases() []Case { return slices.Clone(cases) }

var cases = []Case{CaseNoConnection, CaseErrorAfterConn, CaseSuccessWithID, CaseSuccessWithoutID,
	CaseRedirect, CaseDefinitive, CaseOther4xx, CaseServerError, CaseOtherStatus}

// Verdict is what a case means.
type Verdict struct {
	Result platform.Result
	Reason platform.Reason // "" for Sent
}

// Outcomes is the error -> outcome table: the one place in code that says what each ending
// of a send proves. docs/design.md repeats it (a test keeps the two equal). Only two cases prove
// nothing was created; everything that might have reached the platform is Unknown. The map
// is a copy.
func Outcomes() map[Case]Verdict { return maps.Clone(outcomes) }

var outcomes = map[Case]Verdict{
	CaseNoConnection:     {platform.NotSent, platform.ReasonConnectionFailed},
	CaseErrorAfterConn:   {platform.Unknown, platform.ReasonSendUnknown},
	CaseSuccessWithID:    {platform.Sent, ""},
	CaseSuccessWithoutID: {platform.Unknown, platform.ReasonSendUnknown},
	CaseRedirect:         {platform.Unknown, platform.ReasonSendUnknown},
	CaseDefinitive:       {platform.NotSent, platform.ReasonPlatformRejected},
	CaseOther4xx:         {platform.Unknown, platform.ReasonSendUnknown},
	CaseServerError:      {platform.Unknown, platform.ReasonSendUnknown},
	CaseOtherStatus:      {platform.Unknown, platform.ReasonSendUnknown},
}

// DefaultDefinitive are the statuses that prove nothing was created, unless an adapter
// declares its own list. 409 is not among them: with an idempotency key it often means the
// same key is being processed. The slice is a copy.
func DefaultDefinitive() []int { return slices.Clone(defaultDefinitive) }

var defaultDefinitive = []int{400, 401, 403, 413, 422, 429}

// CaseOf says which case an exchange is. objectID extracts the created object's id from a 2xx
// body ("" or an error when there is none); definitive lists the statuses that prove nothing
// was created.
func CaseOf(ex Exchange, definitive []int, objectID func(body []byte) (string, error)) (Case, string) {
	switch {
	case ex.Status == 0 && !ex.Connected():
		return CaseNoConnection, ""
	case ex.Status == 0:
		return CaseErrorAfterConn, ""
	case ex.Status >= 200 && ex.Status < 300:
		if ex.Err != nil {
			return CaseSuccessWithoutID, ""
		}
		id, err := objectID(ex.Body)
		if err != nil || id == "" {
			return CaseSuccessWithoutID, ""
		}
		return CaseSuccessWithID, id
	case ex.Status >= 300 && ex.Status < 400:
		return CaseRedirect, ""
	case slices.Contains(definitive, ex.Status):
		return CaseDefinitive, ""
	case ex.Status >= 400 && ex.Status < 500:
		return CaseOther4xx, ""
	case ex.Status >= 500 && ex.Status < 600:
		return CaseServerError, ""
	}
	return CaseOtherStatus, ""
}

// Classify turns an exchange into the outcome the table gives it, with the detail the
// evidence keeps: the case, the status, how far the exchange got, and the error text.
func Classify(ex Exchange, definitive []int, objectID func(body []byte) (string, error)) platform.Outcome {
	c, id := CaseOf(ex, definitive, objectID)
	v := outcomes[c]
	detail := map[string]any{"case": string(c), "step": string(ex.Step), "reused_connection": ex.Reused, "elapsed_ms": ex.Elapsed.Milliseconds()}
	if ex.Status != 0 {
		detail["status"] = ex.Status
	}
	if ex.Err != nil {
		detail["error"] = ex.Err.Error()
	}
	if ex.Status >= 300 && len(ex.Body) > 0 {
		detail["response"] = truncate(string(ex.Body), 512)
	}
	return platform.Outcome{Result: v.Result, ObjectID: id, Reason: v.Reason, Detail: detail}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:n], len(s))
}
