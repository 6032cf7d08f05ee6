package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// OpRestore brings an intent of a restored ledger up to what ATMOST_EVENTS shows happened to it
// after the backup point (Restore). It is an operator's repair, run before any worker starts,
// and is deliberately not in Transitions: its guard is relative to the stream, not to a phase.
const OpRestore Operation = "restore"

// StreamTransition is one transition of an intent as ATMOST_EVENTS holds it.
type StreamTransition struct {
	// Seq is the intent's transition number (the event id derives from it).
	Seq int64
	// From is "" for the creation of the intent.
	From State
	To   State
	// Attempt, Epoch and Generation name the attempt the transition concerns, when it does.
	Attempt    identity.AttemptToken
	Epoch      int64
	Generation int64
}

// StreamHistory is what ATMOST_EVENTS holds about one intent from the replay point on, and, when
// the replay found it, the producer's envelope from ATMOST_INTENTS (needed only to recreate an
// intent the restored ledger lacks).
type StreamHistory struct {
	Key         identity.DeliveryKey
	Account     string
	Transitions []StreamTransition
	Envelope    *identity.Envelope
}

// RestoreVerdict says what Restore did, or would do, with one intent.
type RestoreVerdict string

const (
	// RestoreMoved: the ledger held the intent behind the stream; it was moved to To.
	RestoreMoved RestoreVerdict = "moved"
	// RestoreCreated: the ledger lacked the intent; it was created from its envelope in To.
	RestoreCreated RestoreVerdict = "created"
	// RestoreNotBehind: the ledger already holds every transition the stream shows.
	RestoreNotBehind RestoreVerdict = "not_behind"
	// RestorePublishedAlready: the ledger holds it as published, which it never leaves.
	RestorePublishedAlready RestoreVerdict = "published_already"
	// RestoreNoEnvelope: the ledger lacks the intent and ATMOST_INTENTS no longer holds its
	// envelope, so it cannot be recreated: a human must act (see the README's restore protocol).
	RestoreNoEnvelope RestoreVerdict = "no_envelope"
	// RestoreUnknownAccount: the ledger lacks the intent and its account: a human must act.
	RestoreUnknownAccount RestoreVerdict = "unknown_account"
)

// NeedsHuman reports whether the verdict leaves an intent the stream knows outside the ledger.
func (v RestoreVerdict) NeedsHuman() bool {
	return v == RestoreNoEnvelope || v == RestoreUnknownAccount
}

// RestoreResult is Restore's answer for one intent.
type RestoreResult struct {
	Key     identity.DeliveryKey `json:"delivery_key"`
	Account string               `json:"account"`
	Verdict RestoreVerdict       `json:"verdict"`
	// LedgerSeq and LedgerState are the restored ledger's view before (0 and "" when it lacked
	// the intent); StreamSeq and StreamState the stream's latest transition.
	LedgerSeq   int64 `json:"ledger_seq"`
	LedgerState State `json:"ledger_state"`
	StreamSeq   int64 `json:"stream_seq"`
	StreamState State `json:"stream_state"`
	// To is the state the intent was (or, in a dry run, would be) moved to; "" when none.
	To     State  `json:"to,omitempty"`
	Reason Reason `json:"reason,omitempty"`
	// NewSeq numbers the restore's transition: one past the stream's highest, so its event id
	// is new.
	NewSeq int64 `json:"new_seq,omitempty"`
}

// Changes reports whether the verdict moved or created the intent.
func (r RestoreResult) Changes() bool {
	return r.Verdict == RestoreMoved || r.Verdict == RestoreCreated
}

var restoreReasons = map[State]Reason{
	Published:     ReasonRestorePublished,
	Indeterminate: ReasonRestoreAhead,
	Pending:       ReasonRestoreResumed,
	Parked:        ReasonRestoreParked,
}

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("ledger: dry run")

// Restore brings one intent of a restored ledger up to what the stream shows happened to it
// after the backup point, in one guarded statement that writes its history row (actor, and
// detail with the ledger's and the stream's sequence numbers) and outbox row. Only transitions
// ahead of the ledger (seq above its transition_seq) count:
//
//   - a publication ahead: published (restore_published);
//   - an authorization ahead (a transition to or from authorized) with the stream's latest
//     state authorized or indeterminate: indeterminate (restore_ahead) with the stream's
//     attempt, which the reconciler looks up once; bytes may have left;
//   - an authorization ahead that the stream shows resolved by steps the ledger lost:
//     parked (restore_parked), for a human;
//   - no authorization ahead and the stream's latest state pending: pending (restore_resumed).
//     The dispatcher publishes the authorized event and waits for JetStream's acknowledgement
//     before any byte (the witness), so no byte left after the ledger's point;
//   - anything else: parked (restore_parked).
//
// An intent the ledger lacks is created in that state from h.Envelope; without an envelope or
// with an unknown account it is left out and reported (NeedsHuman). Nothing changes for an
// intent the ledger holds as published or not behind the stream, so Restore is idempotent:
// its transition is numbered one past the stream's highest. An intent the stream shows
// authorized or beyond is never made pending. With dryRun the statement runs and is rolled
// back: the result is what it would do.
//
// Run it after bumping the epoch and before any worker starts (the restore protocol).
func (l *Ledger) Restore(ctx context.Context, h StreamHistory, actor string, detail map[string]any, dryRun bool) (RestoreResult, error) {
	if strings.TrimSpace(actor) == "" {
		return RestoreResult{}, errors.New("restore: an operator must be named")
	}
	if err := h.validate(); err != nil {
		return RestoreResult{}, fmt.Errorf("restore %s: %w", h.Key, err)
	}
	raw, err := detailJSON(detail)
	if err != nil {
		return RestoreResult{}, fmt.Errorf("restore %s: detail: %w", h.Key, err)
	}
	p := dbsqlc.IntentRestoreParams{DeliveryKey: h.Key.Bytes(), AccountID: h.Account, Actor: actor, Detail: raw,
		TextHash: []byte{}, SourceVersion: []byte{}}
	for _, t := range h.Transitions {
		token := []byte{}
		if !t.Attempt.IsZero() {
			token = t.Attempt.Bytes()
		}
		p.Seqs = append(p.Seqs, t.Seq)
		p.FromStates = append(p.FromStates, string(t.From))
		p.ToStates = append(p.ToStates, string(t.To))
		p.AttemptTokens = append(p.AttemptTokens, token)
		p.Epochs = append(p.Epochs, t.Epoch)
		p.Generations = append(p.Generations, t.Generation)
	}
	if e := h.Envelope; e != nil {
		p.HasEnvelope = true
		p.Action, p.Target, p.Request, p.Occurrence = e.Action, e.Target, string(e.Request), e.Occurrence
		if th, ok := e.TextHash(); ok {
			p.TextHash = th.Bytes()
		}
		if e.Source != nil {
			p.SourceID, p.SourceVersion = e.Source.ID, e.Source.Version.Bytes()
		}
	}
	var row dbsqlc.IntentRestoreRow
	err = l.inTx(ctx, string(OpRestore), func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentRestore(ctx, p)
		if err == nil && dryRun {
			return errDryRun
		}
		return err
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return RestoreResult{}, fmt.Errorf("restore %s: %w", h.Key, err)
	}
	res := RestoreResult{
		Key: h.Key, Account: h.Account,
		LedgerSeq: row.LedgerSeq, LedgerState: State(row.LedgerState),
		StreamSeq: row.StreamSeq, StreamState: State(row.StreamState),
		To: State(row.ToState),
	}
	switch {
	case res.To != "" && !row.Moved:
		// The verdict was taken on the locked row, so only a concurrent creation of a missing
		// intent gets here: nothing was written.
		return res, refused(OpRestore, ErrInvalidTransition, res.LedgerState)
	case res.To != "" && res.LedgerState == "":
		res.Verdict = RestoreCreated
	case res.To != "":
		res.Verdict = RestoreMoved
	case res.LedgerState == "" && !row.AccountKnown:
		res.Verdict = RestoreUnknownAccount
	case res.LedgerState == "" && h.Envelope == nil:
		res.Verdict = RestoreNoEnvelope
	case res.LedgerState == Published && res.LedgerSeq < res.StreamSeq:
		res.Verdict = RestorePublishedAlready
	default:
		res.Verdict = RestoreNotBehind
	}
	if res.To != "" {
		res.Reason, res.NewSeq = restoreReasons[res.To], row.NewSeq
	}
	return res, nil
}

func (h StreamHistory) validate() error {
	if h.Key.IsZero() || h.Account == "" {
		return errors.New("a delivery key and an account are required")
	}
	if len(h.Transitions) == 0 {
		return errors.New("no transitions")
	}
	for _, t := range h.Transitions {
		if t.Seq < 1 || !t.To.Valid() || (t.From != "" && !t.From.Valid()) || (t.From == "") != (t.Seq == 1) {
			return fmt.Errorf("transition %d %q -> %q is not one the ledger writes", t.Seq, t.From, t.To)
		}
	}
	if e := h.Envelope; e != nil && (e.DeliveryKey() != h.Key || e.Account != h.Account) {
		return errors.New("the envelope is another intent's")
	}
	return nil
}
