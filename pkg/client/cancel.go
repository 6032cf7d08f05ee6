package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/identity"
)

// The cancel service's protocol, which the outcome service's binary serves (internal/outcome)
// and Cancel speaks: a request on CancelSubject(account) whose body is a CancelRequest; the
// reply is a CancelResult, or an error in micro's headers with the codes of the outcome service
// (CodeBadRequest, CodeNotFound, CodeUnavailable). The account is in the subject so that NATS
// permissions scope who may cancel which account's intents, as they scope who may publish them.
const (
	// CancelSubjects is the subject filter the cancel endpoint listens on, one token per account.
	CancelSubjects = "atmost.cancel.*"
)

// CancelSubject is where account's intents are cancelled.
func CancelSubject(account string) string {
	return "atmost.cancel." + identity.AccountToken(account)
}

// CancelRequest is the body of a request to the cancel service.
type CancelRequest struct {
	Key identity.DeliveryKey `json:"delivery_key"`
}

// CancelResult is the answer to a cancel: whether the intent is now parked cancelled, and the
// state it is in either way. One guarded statement decides it (docs/design.md#cancel): an intent
// not yet authorized (pending, or failed and waiting for a retry) is parked cancelled and will
// never be sent; any other is too late, and State says where it is (authorized: the send may be
// under way; published; indeterminate; parked for another reason).
type CancelResult struct {
	Key     identity.DeliveryKey `json:"delivery_key"`
	Account string               `json:"account"`
	// Cancelled is true when the intent is parked cancelled, by this request or an earlier
	// one: cancelling again is safe and answers the same.
	Cancelled bool `json:"cancelled"`
	// State and Reason are the intent's after the request: parked and cancelled when Cancelled.
	State  atmosttype.State  `json:"state"`
	Reason atmosttype.Reason `json:"reason"`
	// Seq is the number of the intent's latest transition.
	Seq int64 `json:"seq,omitzero"`
}

// TooLate reports whether the intent had gone past authorization (or was settled otherwise)
// when the cancel reached the ledger.
func (r CancelResult) TooLate() bool { return !r.Cancelled }

// ErrNoCancelService: nothing answers on the cancel subject (no role serves it, or this
// connection may not request it).
var ErrNoCancelService = errors.New("client: no cancel service answers")

// Cancel asks that the intent of account with key never be sent: it is parked cancelled if it
// is not yet authorized, decided by one statement in the ledger; otherwise the result says too
// late and the state it is in. It fails with ErrNotFound (no such intent of this account: not
// stored yet, or never published), ErrNoCancelService, or the service's or the connection's
// error. A cancel whose answer was lost may be sent again: the second answer says cancelled
// if the first cancelled it.
func (c *Client) Cancel(ctx context.Context, account string, key identity.DeliveryKey) (CancelResult, error) {
	body, err := json.Marshal(CancelRequest{Key: key})
	if err != nil {
		return CancelResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StatusTimeout)
	defer cancel()
	subject := CancelSubject(account)
	reply, err := c.nc.RequestWithContext(ctx, subject, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return CancelResult{}, fmt.Errorf("%w on %s", ErrNoCancelService, subject)
	case err != nil:
		return CancelResult{}, fmt.Errorf("client: cancel of %s: %w", key, err)
	}
	switch code := reply.Header.Get("Nats-Service-Error-Code"); code {
	case "":
	case CodeNotFound:
		return CancelResult{}, fmt.Errorf("%w: %s of account %q", ErrNotFound, key, account)
	default:
		return CancelResult{}, fmt.Errorf("client: cancel of %s: the service answered %s: %s", key, code, reply.Header.Get("Nats-Service-Error"))
	}
	var r CancelResult
	if err := json.Unmarshal(reply.Data, &r); err != nil {
		return CancelResult{}, fmt.Errorf("client: cancel of %s: the answer does not parse: %w", key, err)
	}
	return r, nil
}
