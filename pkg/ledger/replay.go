package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// A reject replay re-submits refused messages the ledger stored, after their cause was fixed
// (the account now exists, say): the caller parses each stored message again exactly as ingest
// does, and ReplayRejects submits the valid envelopes with the same statement as Submit, so a
// key already stored is never a second intent, and writes each replay to the control history
// (kind "reject_replay", scope the reject's id) in the same transaction. A replay that stored
// the reject's intent (created it, or found it stored) marks the reject replayed: a later replay
// skips it unless asked to replay it again. A replay refused again marks nothing, so the reject
// is tried again once the cause is fixed.

// ReplayKind is the control history's kind for a reject replay.
const ReplayKind = "reject_replay"

// ReplayOutcome says what a replay did with one reject.
type ReplayOutcome string

const (
	// ReplayCreated: the envelope is valid and its intent is new: pending, with its history and
	// outbox rows (a dispatch work item), as ingest would have stored it.
	ReplayCreated ReplayOutcome = "created"
	// ReplayAlreadyStored: the envelope is valid and an intent with its key is stored (an earlier
	// replay, the producer publishing it again, another reject of the same intent): nothing new.
	ReplayAlreadyStored ReplayOutcome = "already_stored"
	// ReplayRefused: refused again, for the reason it has now (the account is still missing, or
	// the message was never a valid envelope); nothing was stored but the control history row.
	ReplayRefused ReplayOutcome = "refused"
	// ReplaySkipped: a replay stored this reject's intent before, and the replay was not asked
	// to replay it again; nothing was written.
	ReplaySkipped ReplayOutcome = "skipped"
)

// ReplayCandidate is a stored reject as a replay reads it: every byte the ledger kept of the
// message (Raw: up to MaxRejectRaw, none for an unstorable one) besides what StoredRejection
// says, and Replayed, the latest replay that stored its intent (nil when none has).
type ReplayCandidate struct {
	StoredRejection
	Raw      []byte
	Replayed *ReplayMark
}

// ReplayMark is a replay that stored a reject's intent: who, when, and whether it created the
// intent or found it stored.
type ReplayMark struct {
	Actor   string
	At      time.Time
	Outcome ReplayOutcome
	Key     *identity.DeliveryKey
}

// RejectSelection chooses the rejects a replay reads: refused for Reason ("" any), received at
// or after Since (zero: any time).
type RejectSelection struct {
	Reason string
	Since  time.Time
}

// RejectCursor is where a page of RejectsToReplay begins: after the message at Seq of Stream.
// The zero cursor begins at the first.
type RejectCursor struct {
	Stream string
	Seq    int64
}

// RejectsToReplay returns up to max stored rejects that sel selects, after the cursor, in the
// order ingest read their messages (stream, then stream sequence), each with the bytes the
// ledger kept and its mark. The next page begins after the last one returned.
func (l *Ledger) RejectsToReplay(ctx context.Context, sel RejectSelection, after RejectCursor, max int) ([]ReplayCandidate, error) {
	if max < 1 || max > math.MaxInt32 {
		return nil, fmt.Errorf("rejects to replay: max %d, want at least 1", max)
	}
	seq := after.Seq
	if after == (RejectCursor{}) {
		seq = math.MinInt64
	}
	var rows []dbsqlc.RejectsToReplayRow
	err := l.scan(ctx, "rejects to replay", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.RejectsToReplay(ctx, dbsqlc.RejectsToReplayParams{AfterStream: after.Stream, AfterSeq: seq,
			Reason: strings.TrimSpace(sel.Reason), Since: sel.Since, MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]ReplayCandidate, len(rows))
	for i, r := range rows {
		stored, err := storedRejection(dbsqlc.RejectsListRow{RejectID: r.RejectID, Reason: r.Reason, Detail: r.Detail, Subject: r.Subject,
			Stream: r.Stream, StreamSeq: r.StreamSeq, Headers: r.Headers, Preview: r.Raw[:min(len(r.Raw), RejectPreviewBytes)],
			RawSize: r.RawSize, RawTruncated: r.RawTruncated, RawSha256: r.RawSha256, ReceivedAt: r.ReceivedAt})
		if err != nil {
			return nil, fmt.Errorf("rejects to replay: %w", err)
		}
		out[i] = ReplayCandidate{StoredRejection: stored, Raw: r.Raw}
		if r.ReplayedAt != nil {
			if out[i].Replayed, err = replayMark(r.ReplayedBy.String, *r.ReplayedAt, r.ReplayedAfter); err != nil {
				return nil, fmt.Errorf("rejects to replay: %s: %w", r.RejectID, err)
			}
		}
	}
	return out, nil
}

// CountRejectsToReplay counts the stored rejects sel selects.
func (l *Ledger) CountRejectsToReplay(ctx context.Context, sel RejectSelection) (int64, error) {
	var n int64
	err := l.scan(ctx, "count rejects to replay", func(q *dbsqlc.Queries) (err error) {
		n, err = q.RejectsToReplayCount(ctx, dbsqlc.RejectsToReplayCountParams{Reason: strings.TrimSpace(sel.Reason), Since: sel.Since})
		return err
	})
	return n, err
}

// replayAfter is the after document of a reject_replay row of the control history.
type replayAfter struct {
	Outcome     ReplayOutcome `json:"outcome"`
	Account     *string       `json:"account"`
	DeliveryKey *string       `json:"delivery_key"`
	Reason      *string       `json:"reason"`
	Detail      *string       `json:"detail"`
}

func replayMark(actor string, at time.Time, after []byte) (*ReplayMark, error) {
	var a replayAfter
	if err := json.Unmarshal(after, &a); err != nil {
		return nil, fmt.Errorf("decode a replay from the control history: %w", err)
	}
	m := &ReplayMark{Actor: actor, At: at, Outcome: a.Outcome}
	if a.DeliveryKey != nil {
		key, err := identity.ParseDeliveryKey(*a.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("decode a replay from the control history: %w", err)
		}
		m.Key = &key
	}
	return m, nil
}

// ReplayItem is one stored reject to replay, with ingest's verdict on its stored message now
// (ingest.Parse): Envelope whenever the body is a valid envelope, and Refusal when the message
// is refused (a valid envelope may be, for its subject or its delivery-key header). Only an
// envelope without a refusal goes to the ledger; at least one of the two is set.
type ReplayItem struct {
	RejectID string
	Envelope *identity.Envelope
	Refusal  *identity.RejectError
}

// ReplayResult is what ReplayRejects did with one item.
type ReplayResult struct {
	RejectID string
	Outcome  ReplayOutcome
	// Account and Key are the valid envelope's; empty and nil for a message that is none.
	Account string
	Key     *identity.DeliveryKey
	// Refusal is the reason the message is refused now (ReplayRefused).
	Refusal *identity.RejectError
	// Replayed is the replay that had stored the intent (ReplaySkipped).
	Replayed *ReplayMark
}

// ReplayOptions are who replays and why, written to the control history, and how.
type ReplayOptions struct {
	Actor  string
	Reason string
	// Again replays rejects a replay stored the intent of before; a valid envelope then finds
	// its intent stored (ReplayAlreadyStored), and a new control history row says so.
	Again bool
	// DryRun runs the replay and rolls it back: the results say what it would do now.
	DryRun bool
}

// ReplayRejects replays items in one transaction: the valid envelopes go to the ledger with
// the statement Submit runs (in the items' order, with opts.Actor as the actor of each created
// intent's first history row), and every item not skipped gets its control history row, with
// opts.Actor and opts.Reason, in the same transaction. A created intent's outbox row asks for
// its event and dispatch work item, which the relay publishes as for any Submit. The results
// come in input order. Two replays of one reject at once create at most one intent (the key is
// the intent's primary key): the other finds it stored, or, once the first committed, skips the
// reject. A reject id the ledger does not hold is ErrNotFound, and nothing is written.
func (l *Ledger) ReplayRejects(ctx context.Context, items []ReplayItem, opts ReplayOptions) ([]ReplayResult, error) {
	if strings.TrimSpace(opts.Actor) == "" {
		return nil, errors.New("replay rejects: an operator must be named")
	}
	if err := checkChange(opts.Actor, "reason", opts.Reason); err != nil {
		return nil, fmt.Errorf("replay rejects: %w", err)
	}
	var envelopes []identity.Envelope
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		switch {
		case seen[it.RejectID]:
			return nil, fmt.Errorf("replay rejects: reject %s is given twice", it.RejectID)
		case it.Envelope == nil && it.Refusal == nil:
			return nil, fmt.Errorf("replay rejects: reject %s needs an envelope or a refusal", it.RejectID)
		case it.Refusal == nil:
			envelopes = append(envelopes, *it.Envelope)
		}
		seen[it.RejectID] = true
	}
	if len(items) == 0 {
		return nil, nil
	}
	batch := newSubmitBatch(envelopes, nil, opts.Actor)
	var results []ReplayResult
	err := l.inTxAfter(ctx, "reject replay", l.hotPlans(ctx), func(q *dbsqlc.Queries) error {
		var submitted []SubmitResult
		if !batch.empty() {
			rows, err := q.IntentSubmit(ctx, batch.params)
			if err != nil {
				return err
			}
			if submitted, err = batch.answer(rows, nil); err != nil {
				return err
			}
		}
		results = make([]ReplayResult, len(items))
		p := dbsqlc.RejectReplaysRecordParams{Actor: opts.Actor, Reason: opts.Reason, Again: opts.Again}
		next := 0
		for i, it := range items {
			res := ReplayResult{RejectID: it.RejectID, Outcome: ReplayRefused, Refusal: it.Refusal}
			if it.Envelope != nil {
				key := it.Envelope.DeliveryKey()
				res.Account, res.Key = it.Envelope.Account, &key
			}
			if it.Refusal == nil {
				s := submitted[next]
				next++
				switch s.Outcome {
				case Created:
					res.Outcome = ReplayCreated
				case Duplicate:
					res.Outcome = ReplayAlreadyStored
				case UnknownAccount:
					res.Refusal = UnknownAccountRefusal(it.Envelope.Account)
				default:
					return fmt.Errorf("submit answered %q", s.Outcome)
				}
			}
			results[i] = res
			key, reason, detail := "", "", ""
			if res.Key != nil {
				key = res.Key.String()
			}
			if res.Refusal != nil {
				reason, detail = string(res.Refusal.Reason), StoredText(res.Refusal.Detail)
			}
			p.RejectIds = append(p.RejectIds, it.RejectID)
			p.Outcomes = append(p.Outcomes, string(res.Outcome))
			p.Accounts = append(p.Accounts, res.Account)
			p.DeliveryKeys = append(p.DeliveryKeys, key)
			p.ReasonsNow = append(p.ReasonsNow, reason)
			p.DetailsNow = append(p.DetailsNow, detail)
		}
		rows, err := q.RejectReplaysRecord(ctx, p)
		if err != nil {
			return err
		}
		if len(rows) != len(items) {
			return fmt.Errorf("%d answers for %d rejects", len(rows), len(items))
		}
		for i, row := range rows {
			switch {
			case !row.Known:
				return fmt.Errorf("reject %s: %w", row.RejectID, ErrNotFound)
			case row.Recorded:
				continue
			case row.ReplayedAt == nil:
				return fmt.Errorf("reject %s: not recorded, and no replay stored it before", row.RejectID)
			case results[i].Outcome == ReplayCreated:
				// A replay that stored the intent committed first, yet this one created it: the
				// two cannot both hold, so nothing of this one may stand.
				return fmt.Errorf("reject %s: replayed meanwhile, yet its intent was new here", row.RejectID)
			}
			mark, err := replayMark(row.ReplayedBy.String, *row.ReplayedAt, row.ReplayedAfter)
			if err != nil {
				return err
			}
			results[i] = ReplayResult{RejectID: row.RejectID, Outcome: ReplaySkipped, Account: results[i].Account, Key: results[i].Key, Replayed: mark}
		}
		if opts.DryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("replay %d rejects: %w", len(items), err)
	}
	return results, nil
}
