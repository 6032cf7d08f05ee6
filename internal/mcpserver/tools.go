package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/atmost/atmost/pkg/client"
	"github.com/atmost/atmost/pkg/identity"
)

// The tools' names.
const (
	ToolPublish    = "publish"
	ToolGetOutcome = "get_outcome"
	ToolAwait      = "await_outcome"
	ToolCancel     = "cancel"
)

// retrySafe is what every tool that takes an intent says about calling it again: the agent is
// the one that retries, so it must know why a retry is safe and what would not be.
const retrySafe = `Calling publish again with the same arguments is always safe and is the remedy for any ` +
	`timeout, cut connection or error: the delivery key is a SHA-256 of the account, the action, the target, the ` +
	`request (canonical JSON: keys sorted, whitespace dropped, its top-level "text" normalized) and the occurrence, ` +
	`never of anything per call, so the same arguments name the same intent, which is sent at most once (the broker ` +
	`drops the copy, the ledger counts it a duplicate). Change "occurrence" only to post the same thing a second time on purpose.`

const publishAbout = `Ask atmost to perform one side effect (a post, a reply, a message, a webhook) at most once, ` +
	`for one of the accounts this server allows. Returns the delivery key at once and, when it comes within ` +
	`wait_seconds, the outcome (published with the platform's object_id; failed; parked; rejected). ` + retrySafe +
	` Without an outcome, call await_outcome or get_outcome with the key; never publish different arguments to "try again".`

const getAbout = `Read what became of an intent: its state (pending, authorized, published, failed, indeterminate, parked), ` +
	`the reason, whether a retry may follow, and the platform's object_id once published. Reading changes nothing. ` +
	`Not found shortly after publish means it is not stored yet; if publish itself gave no answer, publish the same arguments again (it cannot post twice).`

const awaitAbout = `Wait until an intent is settled (published, failed, parked, or rejected by ingest), at most ` +
	`timeout_seconds, and return its outcome; settled=false with the last state read when the time ran out (call again: waiting changes nothing). ` +
	`indeterminate means the send's result is unknown: atmost reconciles it by looking at the platform and never sends it again.`

const cancelAbout = `Ask that an intent never be sent. It is cancelled (parked "cancelled", for good) if and only if ` +
	`it is not yet authorized for sending, decided by one statement in the ledger; otherwise the answer is too late, with ` +
	`the state it is in (authorized: the send may be under way; published; ...). Calling it again is safe and answers the same.`

// PublishInput is the publish tool's arguments: the intent (client.Intent) and how long to
// wait for its outcome.
type PublishInput struct {
	Account    string         `json:"account"              jsonschema:"the account to act for, one this server allows"`
	Action     string         `json:"action"               jsonschema:"the action kind, [a-z][a-z0-9_]{0,31}: post, reply, like, message, ..."`
	Target     string         `json:"target,omitempty"     jsonschema:"the stable identity of what the action is about (a thread, a user); empty for none"`
	Request    map[string]any `json:"request"              jsonschema:"the request as the platform will get it, a JSON object; a post is {\"text\": \"...\"}. Give large integers as strings: numbers travel as doubles"`
	Occurrence string         `json:"occurrence,omitempty" jsonschema:"tells deliberate repeats of the same request apart; a new value is a new intent and a second send. Leave it empty or keep it the same when retrying"`
	// WaitSeconds is capped by Config.PublishWait, which is also its default.
	WaitSeconds *float64 `json:"wait_seconds,omitempty" jsonschema:"how long to wait for the outcome, 0 for none; default and most: the server's bound"`
}

// PublishOutput is what publish answers.
type PublishOutput struct {
	DeliveryKey string `json:"delivery_key" jsonschema:"the intent's key: the same arguments always give the same key"`
	Account     string `json:"account"`
	// Seq is the message's sequence in ATMOST_INTENTS (for a duplicate, the first copy's).
	Seq uint64 `json:"seq" jsonschema:"the sequence of the message that carried the intent; get_outcome and await_outcome take it"`
	// Duplicate: this call re-published an intent already taken.
	Duplicate bool `json:"duplicate" jsonschema:"true when the same intent had been published already: nothing new was stored"`
	// Outcome is the last outcome read within the wait; nil when none was.
	Outcome *Outcome `json:"outcome,omitempty"`
}

// KeyInput names an intent: the account and the delivery key, and optionally the message that
// carried it (so that ingest's refusal of it is an outcome too).
type KeyInput struct {
	Account     string `json:"account"       jsonschema:"the intent's account"`
	DeliveryKey string `json:"delivery_key"  jsonschema:"the key publish returned, dk1:<64 hex digits>"`
	Seq         uint64 `json:"seq,omitempty" jsonschema:"the seq publish returned: then an intent ingest refused answers with the refusal instead of not found"`
}

// AwaitInput is await_outcome's arguments.
type AwaitInput struct {
	KeyInput
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty" jsonschema:"how long to wait at most; default and most: the server's bound"`
}

// Outcome is client.Outcome as a tool answers it, with Settled spelled out.
type Outcome struct {
	DeliveryKey string `json:"delivery_key"`
	Account     string `json:"account"`
	State       string `json:"state,omitempty"      jsonschema:"pending, authorized, published, failed, indeterminate or parked; empty when ingest refused the message"`
	Reason      string `json:"reason,omitempty"     jsonschema:"why it is in its state"`
	Retry       string `json:"retry,omitempty"      jsonschema:"what may follow: progress, done, yes, by policy, never or human"`
	Seq         int64  `json:"seq,omitempty"        jsonschema:"the number of the intent's latest transition"`
	ObjectID    string `json:"object_id,omitempty"  jsonschema:"the platform's id of what was created, once published"`
	UpdatedAt   string `json:"updated_at,omitempty"`
	// Rejected is ingest's refusal of the message (State empty): nothing will be sent.
	Rejected *Rejection `json:"rejected,omitempty"`
	Settled  bool       `json:"settled"            jsonschema:"true once published, failed, parked or rejected"`
}

// Rejection is client.Rejection as a tool answers it.
type Rejection struct {
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	Remedy string `json:"remedy,omitempty"`
}

func toOutcome(o client.Outcome) *Outcome {
	out := &Outcome{DeliveryKey: o.Key.String(), Account: o.Account, State: string(o.State), Reason: string(o.Reason),
		Retry: string(o.Retry), Seq: o.Seq, ObjectID: o.ObjectID, Settled: o.Settled()}
	if !o.UpdatedAt.IsZero() {
		out.UpdatedAt = o.UpdatedAt.UTC().Format(time.RFC3339Nano)
	}
	if o.Rejected != nil {
		out.Rejected = &Rejection{Reason: string(o.Rejected.Reason), Detail: o.Rejected.Detail, Remedy: o.Rejected.Remedy}
	}
	return out
}

// seconds is a tool's optional duration argument, capped by max, which is also its default.
func seconds(arg *float64, max time.Duration) (time.Duration, error) {
	if arg == nil {
		return max, nil
	}
	if *arg < 0 {
		return 0, errors.New("a wait cannot be negative")
	}
	return min(time.Duration(*arg*float64(time.Second)), max), nil
}

func t(b bool) *bool { return &b }

// mcpServer is the SDK's server with atmost's tools, each call scoped by sc.
func (s *Server) mcpServer(sc scope) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "atmost", Title: "atmost: side effects at most once", Version: s.cfg.Version},
		&mcp.ServerOptions{Logger: s.cfg.Logger, Instructions: "atmost delivers side effects (posts, messages, webhooks) at most once. " + retrySafe})
	c := s.cfg.Client
	mcp.AddTool(srv, &mcp.Tool{Name: ToolPublish, Title: "Publish an intent, at most once", Description: publishAbout,
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: t(false), OpenWorldHint: t(true)}},
		func(ctx context.Context, req *mcp.CallToolRequest, in PublishInput) (*mcp.CallToolResult, PublishOutput, error) {
			if err := sc.check(req, in.Account); err != nil {
				return nil, PublishOutput{}, err
			}
			wait, err := seconds(in.WaitSeconds, s.cfg.PublishWait)
			if err != nil {
				return nil, PublishOutput{}, err
			}
			r, err := c.Publish(ctx, client.Intent{Account: in.Account, Action: in.Action, Target: in.Target, Request: in.Request, Occurrence: in.Occurrence})
			if err != nil {
				return nil, PublishOutput{}, publishError(err)
			}
			out := PublishOutput{DeliveryKey: r.Key.String(), Account: r.Account, Seq: r.Seq, Duplicate: r.Duplicate}
			if wait > 0 {
				wctx, cancel := context.WithTimeout(ctx, wait)
				defer cancel()
				// A wait that ran out is no failure: the intent is taken, and the outcome read
				// last (if any) says how far it got.
				if o, err := c.Await(wctx, r.Account, r.Key, client.Seq(r.Seq)); err == nil || o.Account != "" || o.Rejected != nil {
					out.Outcome = toOutcome(o)
				}
			}
			return nil, out, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolGetOutcome, Title: "Read an intent's outcome", Description: getAbout,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: t(false)}},
		func(ctx context.Context, req *mcp.CallToolRequest, in KeyInput) (*mcp.CallToolResult, *Outcome, error) {
			key, err := keyOf(req, sc, in)
			if err != nil {
				return nil, nil, err
			}
			o, err := c.Status(ctx, in.Account, key, client.Seq(in.Seq))
			if err != nil {
				return nil, nil, statusError(err)
			}
			return nil, toOutcome(o), nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolAwait, Title: "Wait for an intent's outcome", Description: awaitAbout,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: t(false)}},
		func(ctx context.Context, req *mcp.CallToolRequest, in AwaitInput) (*mcp.CallToolResult, *Outcome, error) {
			key, err := keyOf(req, sc, in.KeyInput)
			if err != nil {
				return nil, nil, err
			}
			wait, err := seconds(in.TimeoutSeconds, s.cfg.MaxAwait)
			if err != nil {
				return nil, nil, err
			}
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			o, err := c.Await(wctx, in.Account, key, client.Seq(in.Seq))
			switch {
			case err == nil:
				return nil, toOutcome(o), nil
			case ctx.Err() == nil && wctx.Err() != nil && (o.Account != "" || o.Rejected != nil):
				return nil, toOutcome(o), nil // settled=false: the time ran out
			case ctx.Err() == nil && wctx.Err() != nil:
				return nil, nil, fmt.Errorf("%s of account %q is not in the ledger yet (after %s): if publish gave no answer, publish the same arguments again", key, in.Account, wait)
			}
			return nil, nil, statusError(err)
		})
	if s.cfg.Canceller != nil {
		cancelTool(srv, sc, s.cfg.Canceller)
	}
	return srv
}

// keyOf checks that the call may act for the account and parses the key. A key of another
// account is refused like any call for it, before anything is read.
func keyOf(req *mcp.CallToolRequest, sc scope, in KeyInput) (identity.DeliveryKey, error) {
	if err := sc.check(req, in.Account); err != nil {
		return identity.DeliveryKey{}, err
	}
	key, err := identity.ParseDeliveryKey(in.DeliveryKey)
	if err != nil {
		return identity.DeliveryKey{}, fmt.Errorf("delivery_key: %w", err)
	}
	return key, nil
}

// publishError says what a failed publish means to an agent: whether to call it again.
func publishError(err error) error {
	var rej *identity.RejectError
	switch {
	case errors.As(err, &rej):
		return fmt.Errorf("refused, nothing was sent: %s: %s (fix the arguments)", rej.Reason, rej.Detail)
	case errors.Is(err, client.ErrMaybePublished):
		return fmt.Errorf("%w; calling publish again with the very same arguments is safe: it is the same intent, sent at most once", err)
	}
	return fmt.Errorf("not published (nothing was stored): %w; publish the same arguments again once the cause is gone", err)
}

// statusError says what a failed read means to an agent.
func statusError(err error) error {
	if errors.Is(err, client.ErrNotFound) {
		return fmt.Errorf("%w: not stored yet (ingest takes a moment after publish), or never published; if publish gave no answer, publish the same arguments again (it cannot post twice)", err)
	}
	return err
}
