package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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
	// envelope, so it cannot be recreated: a human must act (docs/design.md#the-restore-protocol).
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
	// Blocked: the verdict needs a human, and the delivery key was blocked (restore_blocks):
	// Submit answers it as a duplicate until a human lifts the block.
	Blocked bool `json:"blocked,omitempty"`
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
// after the backup point, in one transaction: the row is locked and the verdict taken
// (IntentRestoreVerdict), then one statement changes the row (IntentRestoreUpdate when the
// ledger holds the intent, IntentRestoreCreate when it lacks it), restating every guard on the
// row it changes, and one more writes the history row (actor, and detail with the ledger's and
// the stream's sequence numbers), the outbox row and the duplicate-text claim
// (IntentRestoreRecord). CockroachDB refuses one statement that modifies a table twice, so
// these are separate statements. Only transitions ahead of the ledger (seq above its
// transition_seq) count:
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
// An intent restored to anything but pending re-takes its account's duplicate-text claim (the
// claim its authorization took after the backup is not in the restored ledger), so no other
// intent with the same text is authorized inside the window. The restore cannot carry an
// object id into a published intent: ATMOST_EVENTS does not carry object ids, and the
// restored ledger has no record of the send; object_id stays NULL.
//
// An intent the ledger lacks is created in that state from h.Envelope; without an envelope or
// with an unknown account it is left out, reported (NeedsHuman) and its delivery key blocked
// (restore_blocks): Submit answers a blocked key as a duplicate, so a producer publishing it
// again never creates a pending intent for what may have been sent. Nothing changes for an
// intent the ledger holds as published or not behind the stream, so Restore is idempotent:
// its transition is numbered one past the stream's highest. An intent the stream shows
// authorized or beyond is never made pending. With dryRun the statements run and are rolled
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
	if _, err := detailJSON(detail); err != nil {
		return RestoreResult{}, fmt.Errorf("restore %s: detail: %w", h.Key, err)
	}
	p := dbsqlc.IntentRestoreVerdictParams{DeliveryKey: h.Key.Bytes(), AccountID: h.Account, HasEnvelope: h.Envelope != nil}
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
	var (
		v       dbsqlc.IntentRestoreVerdictRow
		moved   bool
		newSeq  int64
		blocked bool
	)
	err := l.inTx(ctx, string(OpRestore), func(q *dbsqlc.Queries) (err error) {
		moved, newSeq, blocked = false, 0, false
		if v, err = q.IntentRestoreVerdict(ctx, p); err != nil {
			return err
		}
		switch {
		case v.ToState != "":
			if moved, newSeq, err = restoreWrite(ctx, q, h, v, p, actor, detail); err != nil {
				return err
			}
		case v.LedgerState == "" && v.StreamSeq > 0 && (!v.AccountKnown || h.Envelope == nil):
			reason := RestoreNoEnvelope
			if !v.AccountKnown {
				reason = RestoreUnknownAccount
			}
			if err = q.IntentRestoreBlock(ctx, dbsqlc.IntentRestoreBlockParams{DeliveryKey: h.Key.Bytes(), AccountID: h.Account,
				Reason: string(reason), Actor: actor, StreamSeq: v.StreamSeq, StreamState: v.StreamState}); err != nil {
				return err
			}
			blocked = true
		}
		if dryRun {
			return errDryRun
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return RestoreResult{}, fmt.Errorf("restore %s: %w", h.Key, err)
	}
	res := RestoreResult{
		Key: h.Key, Account: h.Account,
		LedgerSeq: v.LedgerSeq, LedgerState: State(v.LedgerState),
		StreamSeq: v.StreamSeq, StreamState: State(v.StreamState),
		To: State(v.ToState), Blocked: blocked,
	}
	switch {
	case res.To != "" && !moved:
		// The verdict was taken on the locked row, so only a concurrent creation of a missing
		// intent, or a row that changed after the verdict, gets here: nothing was written.
		return res, refused(OpRestore, ErrInvalidTransition, res.LedgerState)
	case res.To != "" && res.LedgerState == "":
		res.Verdict = RestoreCreated
	case res.To != "":
		res.Verdict = RestoreMoved
	case res.LedgerState == "" && !v.AccountKnown:
		res.Verdict = RestoreUnknownAccount
	case res.LedgerState == "" && h.Envelope == nil:
		res.Verdict = RestoreNoEnvelope
	case res.LedgerState == Published && res.LedgerSeq < res.StreamSeq:
		res.Verdict = RestorePublishedAlready
	default:
		res.Verdict = RestoreNotBehind
	}
	if res.To != "" {
		res.Reason, res.NewSeq = restoreReasons[res.To], newSeq
	}
	return res, nil
}

// restoreWrite changes the row as the verdict v says (the guards restated in the statement)
// and, when it did, records the transition. moved is false when the statement's guard refused.
func restoreWrite(ctx context.Context, q *dbsqlc.Queries, h StreamHistory, v dbsqlc.IntentRestoreVerdictRow,
	p dbsqlc.IntentRestoreVerdictParams, actor string, detail map[string]any) (moved bool, newSeq int64, err error) {
	to := State(v.ToState)
	reason, ok := restoreReasons[to]
	if !ok {
		return false, 0, fmt.Errorf("restore verdict %q is not a state the restore writes", v.ToState)
	}
	// The history row's detail: the caller's, and the ledger's and the stream's points.
	facts := make(map[string]any, len(detail)+4)
	for k, x := range detail {
		facts[k] = x
	}
	facts["ledger_seq"], facts["stream_seq"] = v.LedgerSeq, v.StreamSeq
	facts["stream_state"], facts["authorizations_ahead"] = v.StreamState, v.AuthorizationsAhead
	raw, err := detailJSON(facts)
	if err != nil {
		return false, 0, err
	}
	type written struct {
		account    string
		state      string
		token      []byte
		epoch, gen pgtype.Int8
		seq        int64
		textHash   []byte
	}
	var w written
	if v.LedgerState != "" {
		row, err := q.IntentRestoreUpdate(ctx, dbsqlc.IntentRestoreUpdateParams{DeliveryKey: p.DeliveryKey,
			Seqs: p.Seqs, FromStates: p.FromStates, ToStates: p.ToStates, ToState: v.ToState, ToReason: string(reason),
			LedgerSeq: v.LedgerSeq, StreamSeq: v.StreamSeq, StreamAttemptToken: v.StreamAttemptToken,
			StreamEpoch: v.StreamEpoch, StreamGeneration: v.StreamGeneration, AuthorizationsAhead: v.AuthorizationsAhead})
		if errors.Is(err, pgx.ErrNoRows) {
			return false, 0, nil
		}
		if err != nil {
			return false, 0, err
		}
		w = written{row.AccountID, row.State, row.AttemptToken, row.Epoch, row.Generation, row.TransitionSeq, row.TextHash}
	} else {
		c := dbsqlc.IntentRestoreCreateParams{DeliveryKey: p.DeliveryKey, AccountID: h.Account,
			Seqs: p.Seqs, FromStates: p.FromStates, ToStates: p.ToStates, ToState: v.ToState, ToReason: string(reason),
			StreamSeq: v.StreamSeq, StreamAttemptToken: v.StreamAttemptToken, StreamEpoch: v.StreamEpoch,
			StreamGeneration: v.StreamGeneration, AuthorizationsAhead: v.AuthorizationsAhead,
			TextHash: []byte{}, SourceVersion: []byte{}, ReplyTo: []byte{}}
		if e := h.Envelope; e != nil {
			if !e.ReplyTo.IsZero() {
				c.ReplyTo = e.ReplyTo.Bytes() // a reply recreated still waits for its parent
			}
			c.Action, c.Target, c.Request, c.Occurrence = e.Action, e.Target, string(e.Request), e.Occurrence
			c.NotBefore, c.ExpiresAt = scheduleText(e.NotBefore), scheduleText(e.ExpiresAt)
			if th, ok := e.TextHash(); ok {
				c.TextHash = th.Bytes()
			}
			if e.Source != nil {
				c.SourceID, c.SourceVersion = e.Source.ID, e.Source.Version.Bytes()
			}
		}
		row, err := q.IntentRestoreCreate(ctx, c)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, 0, nil
		}
		if err != nil {
			return false, 0, err
		}
		w = written{row.AccountID, row.State, row.AttemptToken, row.Epoch, row.Generation, row.TransitionSeq, row.TextHash}
	}
	// From the ledger's state, or, for an intent the ledger lacked, from the stream's latest:
	// the transition continues the history the stream holds.
	from := v.LedgerState
	if from == "" {
		from = v.StreamState
	}
	rec, err := q.IntentRestoreRecord(ctx, dbsqlc.IntentRestoreRecordParams{DeliveryKey: p.DeliveryKey, Seq: w.seq,
		FromState: from, ToState: w.state, Reason: string(reason), AttemptToken: w.token, Epoch: w.epoch, Generation: w.gen,
		Actor: actor, Detail: raw, AccountID: w.account, TextHash: w.textHash})
	if err != nil {
		return false, 0, err
	}
	if rec.HistoryRows != 1 {
		return false, 0, fmt.Errorf("restore: %d history rows written, want 1", rec.HistoryRows)
	}
	return true, w.seq, nil
}

// RestorePoint is what a restored ledger says about its backup point and its epochs, for the
// checks of the restore protocol (atmost restore reconcile).
type RestorePoint struct {
	// Epoch is the current epoch; OtherEpochsAt when the newest other one began (zero when
	// there is none).
	Epoch         EpochStart
	OtherEpochsAt time.Time
	// NewestHistoryAt is the time of the newest history row not written by a restore (zero when
	// there is none): the backup was taken at or after it.
	NewestHistoryAt time.Time
	// CurrentEpochHistory counts the history rows not written by a restore that carry the
	// current epoch: a worker of that epoch already worked.
	CurrentEpochHistory int64
}

// RestorePoint reads the restored ledger's backup point and epochs.
func (l *Ledger) RestorePoint(ctx context.Context) (RestorePoint, error) {
	var row dbsqlc.RestoreLedgerPointRow
	err := l.inTx(ctx, "restore point", func(q *dbsqlc.Queries) (err error) {
		row, err = q.RestoreLedgerPoint(ctx)
		return err
	})
	if err != nil {
		return RestorePoint{}, fmt.Errorf("restore point: %w", err)
	}
	epoch, err := l.CurrentEpoch(ctx)
	if err != nil {
		return RestorePoint{}, err
	}
	if epoch.Epoch != row.CurrentEpoch {
		return RestorePoint{}, errors.New("restore point: the epoch changed while it was read; run it again")
	}
	pt := RestorePoint{Epoch: epoch, CurrentEpochHistory: row.CurrentEpochHistory}
	if row.HasOtherEpochs {
		pt.OtherEpochsAt = row.OtherEpochsAt
	}
	if row.HasHistory {
		pt.NewestHistoryAt = row.NewestHistoryAt
	}
	return pt, nil
}

// StreamPosition is one authorized transition of an intent, its attempt, and the stream
// sequence of the message on ATMOST_EVENTS that holds it.
type StreamPosition struct {
	Key       identity.DeliveryKey  `json:"delivery_key"`
	Seq       int64                 `json:"seq"`
	Attempt   identity.AttemptToken `json:"attempt"`
	StreamSeq uint64                `json:"stream_seq"`
}

// RecordedWitness returns the restored ledger's witness that a replay of ATMOST_EVENTS reaches
// back to its backup: of the attempts it holds published by the dispatcher, the one whose
// evidence records the highest stream sequence JetStream named when it acknowledged the
// attempt's authorized event (Outcome.WitnessSeq). The dispatcher sent only after that
// acknowledgement and recorded the publication after the send, so the message at that
// sequence was stored before the backup, and every transition the backup lacks was stored
// after it: a replay that reads every message from it on holds them all. Copies of events
// stored elsewhere on the stream prove nothing and are not asked about. ok is false when no
// attempt records one (a backup written before atmost recorded it: see RestoreWitness).
func (l *Ledger) RecordedWitness(ctx context.Context) (w StreamPosition, ok bool, err error) {
	var row dbsqlc.RestoreRecordedWitnessRow
	err = l.inTx(ctx, "restore witness", func(q *dbsqlc.Queries) (err error) {
		row, err = q.RestoreRecordedWitness(ctx)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return StreamPosition{}, false, nil
	}
	if err != nil {
		return StreamPosition{}, false, fmt.Errorf("restore witness: %w", err)
	}
	key, err := identity.DeliveryKeyFromBytes(row.DeliveryKey)
	if err != nil {
		return StreamPosition{}, false, fmt.Errorf("restore witness: %w", err)
	}
	token, err := identity.AttemptTokenFromBytes(row.AttemptToken)
	if err != nil {
		return StreamPosition{}, false, fmt.Errorf("restore witness: %w", err)
	}
	if row.WitnessSeq < 1 {
		return StreamPosition{}, false, fmt.Errorf("restore witness: %s records witness sequence %d", key, row.WitnessSeq)
	}
	return StreamPosition{Key: key, Seq: row.Seq, Attempt: token, StreamSeq: uint64(row.WitnessSeq)}, true, nil
}

// restoreWitnessBatch is how many positions one RestoreWitness statement looks at.
const restoreWitnessBatch = 1000

// RestoreWitness is the witness of a restored ledger that records none (RecordedWitness: a
// backup written before atmost recorded the stream sequence of each acknowledged
// authorization). Of the authorized events a replay of the whole of ATMOST_EVENTS read, the
// first copy of each, it returns the one with the highest stream sequence that the restored
// ledger proves was stored before its backup: the ledger holds that authorization, of that
// attempt, followed by its publication, which the dispatcher records only after a send it
// made only once JetStream had acknowledged the authorized event. That proves it of the copy
// JetStream acknowledged, which is the first copy the replay read only while the stream still
// holds it: a copy stored again later (a relay's publish flushed after the duplicate window)
// is a false witness once the first is gone. ok is false when none of them is a witness.
func (l *Ledger) RestoreWitness(ctx context.Context, authorized []StreamPosition) (w StreamPosition, ok bool, err error) {
	sorted := slices.Clone(authorized)
	slices.SortFunc(sorted, func(a, b StreamPosition) int { return cmp.Compare(b.StreamSeq, a.StreamSeq) })
	for chunk := range slices.Chunk(sorted, restoreWitnessBatch) {
		p := dbsqlc.RestoreWitnessParams{}
		for _, c := range chunk {
			p.DeliveryKeys = append(p.DeliveryKeys, c.Key.Bytes())
			p.Seqs = append(p.Seqs, c.Seq)
			p.AttemptTokens = append(p.AttemptTokens, c.Attempt.Bytes())
			p.StreamSeqs = append(p.StreamSeqs, int64(c.StreamSeq))
		}
		var rows []dbsqlc.RestoreWitnessRow
		err = l.inTx(ctx, "restore witness", func(q *dbsqlc.Queries) (err error) {
			rows, err = q.RestoreWitness(ctx, p)
			return err
		})
		if err != nil {
			return StreamPosition{}, false, fmt.Errorf("restore witness: %w", err)
		}
		if len(rows) > 0 {
			for _, c := range chunk {
				if int64(c.StreamSeq) == rows[0].StreamSeq && c.Seq == rows[0].Seq {
					return c, true, nil
				}
			}
		}
	}
	return StreamPosition{}, false, nil
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
