package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// Outcome is a worker's report of one authorized attempt.
type Outcome struct {
	Result TransportResult
	// ObjectID is the platform's id of the created object (Sent).
	ObjectID string
	// Confirmed: the object was read back by id and its canonical text matched (Sent).
	Confirmed bool
	// Reason says why, for NotSent (ReasonConnectionFailed or ReasonPlatformRejected) and
	// optionally for Unknown (default ReasonSendUnknown). For Sent it is "" or
	// ReasonPublishedUnread: the account takes the platform's answer naming the object as the
	// proof, nothing is read back, and history says so under its own reason.
	Reason Reason
	// Detail is kept with the evidence and the history row: status codes, error text. Never
	// a credential or a full request body.
	Detail map[string]any
	// WitnessSeq is the stream sequence JetStream named when it acknowledged the attempt's
	// authorized event on ATMOST_EVENTS before the first byte (0: no acknowledgement). Kept
	// with the evidence: a restored ledger holding the attempt published names with it a
	// message stored before its backup, where `atmost restore reconcile` replays from.
	WitnessSeq uint64
	// Signal is what the outcome says about the account's platform, fed to its health
	// (docs/design.md#account-health); "" derives it from Result, Reason and the detail's
	// "status" (SignalOf). An adapter that knows better (a status it declares an authentication
	// failure, a 5xx it proves unsent) sets it.
	Signal Signal
}

// verdict maps an outcome to the state and reason it leads to. Only a confirmed success
// publishes; only a proven not-sent fails; everything else is indeterminate.
func (o Outcome) verdict() (State, Reason, error) {
	switch o.Result {
	case Sent:
		switch {
		case o.ObjectID == "":
			return Indeterminate, ReasonSendUnknown, nil
		case o.Reason == ReasonPublishedUnread:
			return Published, ReasonPublishedUnread, nil
		case !o.Confirmed:
			return Indeterminate, ReasonReadbackMismatch, nil
		default:
			return Published, ReasonPublished, nil
		}
	case NotSent:
		if o.Reason != ReasonConnectionFailed && o.Reason != ReasonPlatformRejected {
			return "", "", fmt.Errorf("%w: a not-sent outcome needs reason %s or %s, got %q", ErrMalformedOutcome, ReasonConnectionFailed, ReasonPlatformRejected, o.Reason)
		}
		if SignalOf(o) == SignalAuth {
			// Refused for the account's credential, which holds the account (auth_failed):
			// retried always, so the intent waits with the others and is sent once an
			// operator rotated the credential and resumed the account.
			return Failed, ReasonCredentialRefused, nil
		}
		return Failed, o.Reason, nil
	case Unknown:
		switch o.Reason {
		case "":
			return Indeterminate, ReasonSendUnknown, nil
		case ReasonSendUnknown, ReasonReadbackMismatch:
			return Indeterminate, o.Reason, nil
		}
		return "", "", fmt.Errorf("%w: an unknown outcome cannot have reason %q", ErrMalformedOutcome, o.Reason)
	}
	return "", "", fmt.Errorf("%w: unknown transport result %q", ErrMalformedOutcome, o.Result)
}

// Completion is what Complete did.
type Completion struct {
	State  State
	Reason Reason
	// Repeated: this attempt's completion had landed on an earlier call whose answer was lost;
	// State is where the intent stands now, and nothing was written again.
	Repeated bool
}

// Report is one outcome for CompleteMany: the claim that was authorized and what happened.
type Report struct {
	Claim   Claim
	Outcome Outcome
}

// CompletionResult is the answer to one Report: a Completion, or Err, a *RefusedError.
type CompletionResult struct {
	Completion Completion
	Err        error
	// Outbox is what the completion left in the outbox of the intent, for its writer to
	// publish.
	Outbox Outboxed
}

// Complete records the outcome of an authorized attempt: a confirmed success publishes, a
// proven not-sent fails (and releases the duplicate-text claim), anything else is
// indeterminate. When the claim's fence is no longer current (a newer attempt, an epoch bump,
// or the sweeper already moved the intent on) it changes no state and returns ErrFenced; the
// outcome is kept as evidence either way. Asked again after an error whose outcome was unknown
// (the COMMIT's answer lost), a completion that had landed answers as it landed (Repeated) and
// writes nothing, no fenced evidence of a newer attempt that does not exist.
func (l *Ledger) Complete(ctx context.Context, c Claim, o Outcome) (Completion, error) {
	res, err := l.CompleteMany(ctx, []Report{{Claim: c, Outcome: o}})
	if err != nil {
		return Completion{}, err
	}
	return res[0].Completion, res[0].Err
}

// CompleteMany is Complete for a batch of distinct intents in one statement: each gets its
// own answer, in input order. The error is for the batch as a whole (the database, an outcome
// that is not well formed).
func (l *Ledger) CompleteMany(ctx context.Context, reports []Report) ([]CompletionResult, error) {
	index, err := indexKeys(len(reports), func(i int) identity.DeliveryKey { return reports[i].Claim.Key })
	if err != nil {
		return nil, fmt.Errorf("complete: %w", err)
	}
	var p dbsqlc.IntentsCompleteParams
	reasons := make([]Reason, len(reports))
	for i, r := range reports {
		to, reason, err := r.Outcome.verdict()
		if err != nil {
			return nil, fmt.Errorf("complete %s: %w", r.Claim.Key, err)
		}
		reasons[i] = reason
		detail, err := detailJSON(r.Outcome.Detail)
		if err != nil {
			return nil, fmt.Errorf("complete %s: detail: %w: %w", r.Claim.Key, ErrMalformedOutcome, err)
		}
		p.DeliveryKeys = append(p.DeliveryKeys, r.Claim.Key.Bytes())
		p.AttemptTokens = append(p.AttemptTokens, r.Claim.Token.Bytes())
		p.Epochs = append(p.Epochs, r.Claim.Epoch)
		p.Generations = append(p.Generations, r.Claim.Generation)
		p.ToStates = append(p.ToStates, string(to))
		p.Reasons = append(p.Reasons, string(reason))
		p.ObjectIds = append(p.ObjectIds, noNUL(r.Outcome.ObjectID))
		p.Outcomes = append(p.Outcomes, string(r.Outcome.Result))
		p.Details = append(p.Details, string(detail))
		p.WitnessSeqs = append(p.WitnessSeqs, int64(r.Outcome.WitnessSeq))
	}
	p.Actor = l.cfg.Actor
	var rows []dbsqlc.IntentsCompleteRow
	var before earlier
	err = l.inTxForgetting(ctx, string(OpComplete), l.earlierBehind(p.DeliveryKeys, func(i int) int64 { return reports[i].Claim.Acknowledged }, &before), func(q *dbsqlc.Queries) (err error) {
		p.Writer = before.writer
		rows, err = q.IntentsComplete(ctx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d intents: %w", len(reports), err)
	}
	// The completions that landed feed their accounts' health, in a transaction of their own
	// (the completion's is one pipelined statement), and only when there is something to say:
	// a signal other than ok or neutral, or an account whose health watches (holding, probing,
	// counting).
	// A crash between the two loses a count, never an outcome: the next reports trip it.
	var health []healthReport
	watch := false
	for _, row := range rows {
		if !row.NewState.Valid || !row.OutAccount.Valid {
			continue
		}
		i, err := index.of(row.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("complete: %w", err)
		}
		s := SignalOf(reports[i].Outcome)
		watch = watch || row.HealthWatch || (s != SignalOK && s != SignalNeutral)
		health = append(health, healthReport{row.OutAccount.String, reports[i].Claim.Token.Bytes(), s})
	}
	if watch {
		if _, err := l.reportHealth(ctx, health); err != nil {
			return nil, fmt.Errorf("complete %d intents: the outcomes are recorded, their accounts' health is not: %w", len(reports), err)
		}
	}
	out := make([]CompletionResult, len(reports))
	for _, row := range rows {
		i, err := index.of(row.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("complete: %w", err)
		}
		own, err := addOutboxed(nil, outboxed{row.DeliveryKey, false, row.OutSeq, row.OutDispatch, row.OutAccount,
			row.OutFrom, row.OutTo, row.OutReason, row.OutToken, row.OutEpoch, row.OutGeneration, row.OutActor, row.OutAt, row.OutTraceparent})
		if err != nil {
			return nil, fmt.Errorf("complete: %w", err)
		}
		out[i].Outbox = before.outboxed(reports[i].Claim.Key, own)
		switch {
		case !row.PriorState.Valid:
			out[i].Err = refused(OpComplete, ErrNotFound, "")
		case !row.NewState.Valid && row.Repeated:
			// The caller's own completion, which had committed while its answer was lost.
			out[i].Completion = Completion{State: State(row.PriorState.String), Reason: reasons[i], Repeated: true}
		case !row.NewState.Valid:
			out[i].Err = refused(OpComplete, ErrFenced, State(row.PriorState.String))
		default:
			out[i].Completion = Completion{State: State(row.NewState.String), Reason: reasons[i]}
		}
	}
	return out, nil
}

// detailJSON encodes a detail map for a JSONB column. PostgreSQL refuses the NUL character in
// JSONB and TEXT, and a platform's answer may carry one: it becomes U+FFFD, so that no answer
// can make an outcome unrecordable.
func detailJSON(detail map[string]any) ([]byte, error) {
	if len(detail) == 0 {
		return []byte("{}"), nil
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(b, []byte(`\u0000`), []byte(`\ufffd`)), nil
}

// noNUL replaces the NUL characters PostgreSQL refuses in TEXT.
func noNUL(s string) string { return strings.ReplaceAll(s, "\x00", "\uFFFD") }
