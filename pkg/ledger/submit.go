package ledger

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// SubmitOutcome says what Submit did with one intent.
type SubmitOutcome string

const (
	// Created: the intent is new and now pending, with its history and outbox rows.
	Created SubmitOutcome = "created"
	// Duplicate: an intent with this delivery key exists (or came earlier in the same batch);
	// nothing changed. Redelivery and re-publishing end here.
	Duplicate SubmitOutcome = "duplicate"
	// UnknownAccount: the account is not configured; nothing was stored. Ingest rejects the
	// message with reason unknown_account.
	UnknownAccount SubmitOutcome = "unknown_account"
)

// UnknownAccountRefusal is the refusal of a valid envelope whose account is not configured
// (Submit's UnknownAccount): ingest stores it as the message's reject, and a replay of the
// reject reports it again while the account is still missing.
func UnknownAccountRefusal(account string) *identity.RejectError {
	return &identity.RejectError{Reason: identity.ReasonUnknownAccount, Detail: "account " + strconv.Quote(account) + " is not configured"}
}

// SubmitResult is Submit's answer for one intent of the batch.
type SubmitResult struct {
	Key     identity.DeliveryKey
	Outcome SubmitOutcome
	// Outbox is what the outbox holds of the intent once Submit committed, for its writer to
	// publish: a created intent's pending transition, or what is left unpublished of a stored
	// one (a redelivery after its ingester died before publishing). A second occurrence of an
	// intent in the batch names none, and is Complete: its first occurrence names them (or, at
	// SERIALIZABLE, leaves its intent to be read back).
	Outbox Outboxed
}

// Submit stores a batch of parsed intents in one transaction and reports, in input order, which
// were created and which were duplicates. It is idempotent: submitting the same batch again
// creates nothing. A created intent is pending, with history row 1 (reason submitted) and an
// outbox row that also asks for dispatch. A created intent's source version becomes the
// source's stored head (the last one in the batch, when several versions of one source come
// together), so intents resting on an older version park as superseded at authorization.
func (l *Ledger) Submit(ctx context.Context, intents []identity.Envelope) ([]SubmitResult, error) {
	return l.SubmitTraced(ctx, intents, nil)
}

// SubmitTraced is Submit, storing with each created intent the W3C traceparent at the same
// index of traceparents ("" or a short slice: none), which the relay then carries on the
// intent's work items and events. It is no part of the intent's identity: the delivery key
// and the request are the envelope's alone, so an intent submitted again with another
// traceparent is a duplicate and keeps the first one's.
func (l *Ledger) SubmitTraced(ctx context.Context, intents []identity.Envelope, traceparents []string) ([]SubmitResult, error) {
	b := newSubmitBatch(intents, traceparents, l.cfg.Actor)
	if b.empty() {
		return b.results, nil
	}
	var rows []dbsqlc.IntentSubmitRow
	var before earlier
	err := l.inTxForgetting(ctx, string(OpSubmit), l.earlierBehind(b.params.DeliveryKeys, nil, &before), func(q *dbsqlc.Queries) (err error) {
		b.params.Writer = before.writer
		rows, err = q.IntentSubmit(ctx, b.params)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("submit %d intents: %w", len(b.first), err)
	}
	return b.answer(rows, &before)
}

// submitBatch is one IntentSubmit: its parameters, and how its rows answer the intents given.
// Submit runs one alone; a reject replay runs one in its own transaction, with the operator as
// actor.
type submitBatch struct {
	params  dbsqlc.IntentSubmitParams
	results []SubmitResult
	first   map[identity.DeliveryKey]int // where each distinct key first comes in the input
}

func newSubmitBatch(intents []identity.Envelope, traceparents []string, actor string) *submitBatch {
	b := &submitBatch{results: make([]SubmitResult, len(intents)), first: make(map[identity.DeliveryKey]int, len(intents))}
	p := &b.params
	for i, e := range intents {
		key := e.DeliveryKey()
		b.results[i] = SubmitResult{Key: key, Outcome: Duplicate}
		if _, seen := b.first[key]; seen {
			continue // the same intent twice in one batch: the first occurrence decides
		}
		b.first[key] = i
		p.DeliveryKeys = append(p.DeliveryKeys, key.Bytes())
		p.AccountIds = append(p.AccountIds, e.Account)
		p.Actions = append(p.Actions, e.Action)
		p.Targets = append(p.Targets, e.Target)
		p.Requests = append(p.Requests, string(e.Request))
		p.Occurrences = append(p.Occurrences, e.Occurrence)
		textHash := []byte{}
		if h, ok := e.TextHash(); ok {
			textHash = h.Bytes()
		}
		p.TextHashes = append(p.TextHashes, textHash)
		p.NotBefores = append(p.NotBefores, scheduleText(e.NotBefore))
		p.ExpiresAts = append(p.ExpiresAts, scheduleText(e.ExpiresAt))
		sourceID, sourceVersion := "", []byte{}
		if e.Source != nil {
			sourceID, sourceVersion = e.Source.ID, e.Source.Version.Bytes()
		}
		p.SourceIds = append(p.SourceIds, sourceID)
		p.SourceVersions = append(p.SourceVersions, sourceVersion)
		traceparent := ""
		if i < len(traceparents) {
			traceparent = traceparents[i]
		}
		p.Traceparents = append(p.Traceparents, traceparent)
		replyTo := []byte{}
		if !e.ReplyTo.IsZero() {
			replyTo = e.ReplyTo.Bytes()
		}
		p.ReplyTos = append(p.ReplyTos, replyTo)
	}
	p.Actor = actor
	return b
}

// empty reports whether the batch has nothing for the database.
func (b *submitBatch) empty() bool { return len(b.first) == 0 }

// answer reads IntentSubmit's rows into the results, in input order, with what the outbox
// holds of each intent where before says what it held earlier (nil: no Outbox).
func (b *submitBatch) answer(rows []dbsqlc.IntentSubmitRow, before *earlier) ([]SubmitResult, error) {
	if len(rows) != len(b.first) {
		return nil, fmt.Errorf("submit: %d answers for %d intents", len(rows), len(b.first))
	}
	for _, row := range rows {
		key, err := identity.DeliveryKeyFromBytes(row.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
		i, ok := b.first[key]
		if !ok {
			return nil, fmt.Errorf("submit: answer for %s, which was not submitted", key)
		}
		b.results[i].Outcome = SubmitOutcome(row.Outcome)
		if before == nil {
			continue
		}
		own, err := addOutboxed(nil, outboxed{key: row.DeliveryKey, seq: pgtype.Int8{Int64: row.OutSeq, Valid: row.Outcome == string(Created)},
			dispatch: row.OutDispatch, account: pgtype.Text{String: row.OutAccount, Valid: true}, from: row.OutFrom,
			to: pgtype.Text{String: row.OutTo, Valid: true}, reason: pgtype.Text{String: row.OutReason, Valid: true},
			token: row.OutToken, epoch: row.OutEpoch, gen: row.OutGeneration, actor: row.OutActor, at: row.OutAt,
			traceparent: pgtype.Text{String: row.OutTraceparent, Valid: row.OutTraceparent != ""}})
		if err != nil {
			return nil, fmt.Errorf("submit: %w", err)
		}
		b.results[i].Outbox = before.outboxed(key, own)
	}
	if before != nil {
		for i, r := range b.results {
			if b.first[r.Key] != i {
				// A second occurrence: the first names (or leaves unread) everything of the
				// intent, which its writer would otherwise publish twice.
				b.results[i].Outbox = Outboxed{Complete: true}
			}
		}
	}
	return b.results, nil
}

// scheduleText is how Submit passes an envelope's time: RFC 3339, "" for none.
func scheduleText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return identity.FormatTime(t)
}
