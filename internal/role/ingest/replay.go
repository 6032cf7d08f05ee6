package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// A reject replay judges each stored message again with Parse, exactly as ingest judged it,
// and hands the verdicts to the ledger's ReplayRejects. atmost rejects replay and the console's
// Rejects page both replay a page of rejects with ReplayPage, so the two choose, judge and
// count alike.

// ReplayPageSize is how many stored rejects a replay reads and replays in one transaction.
const ReplayPageSize = 200

// NotReplayable is the outcome of a reject that Parse cannot judge again (Unreplayable says
// why); the other outcomes are the ledger's (ledger.ReplayOutcome).
const NotReplayable = "not_replayable"

// Replayed is one stored reject as a replay left it: Outcome is a ledger.ReplayOutcome or
// NotReplayable, Why says why it is not replayable, and Result is the ledger's answer (its
// zero value for a reject that is not replayable).
type Replayed struct {
	Reject  ledger.ReplayCandidate
	Outcome string
	Why     string
	Result  ledger.ReplayResult
}

// ReplayPage replays one page of stored rejects (RejectsToReplay's) in one ReplayRejects
// transaction, in the page's order: only those whose envelope names account when account is
// not empty (a reject that cannot be judged again names no account then, and is left out), and
// at most max of them when max > 0, full then saying that the page held more. A reject that
// cannot be judged again is reported NotReplayable and never reaches the ledger. With
// opts.DryRun the ledger rolls the page back: the outcomes are what a replay would do now.
func ReplayPage(ctx context.Context, l *ledger.Ledger, page []ledger.ReplayCandidate, account string, max int, opts ledger.ReplayOptions) (out []Replayed, full bool, err error) {
	var items []ledger.ReplayItem
	var at []int // where each item's result goes in out
	for _, cand := range page {
		if max > 0 && len(out) >= max {
			full = true
			break
		}
		why := Unreplayable(cand)
		var env identity.Envelope
		var refusal *identity.RejectError
		if why == "" {
			env, refusal = Parse(cand.Subject, nats.Header(cand.Headers), cand.Raw)
		}
		if account != "" && (why != "" || env.Account != account) {
			continue
		}
		if why != "" {
			out = append(out, Replayed{Reject: cand, Outcome: NotReplayable, Why: why})
			continue
		}
		item := ledger.ReplayItem{RejectID: cand.ID, Refusal: refusal}
		if env.Account != "" {
			item.Envelope = &env
		}
		items = append(items, item)
		at = append(at, len(out))
		out = append(out, Replayed{Reject: cand})
	}
	results, err := l.ReplayRejects(ctx, items, opts)
	if err != nil {
		return nil, false, err
	}
	for i, res := range results {
		out[at[i]].Outcome, out[at[i]].Result = string(res.Outcome), res
	}
	return out, full, nil
}

// Unreplayable says why a stored reject cannot go through Parse again, or "" when it can: the
// whole message must be there as it came.
func Unreplayable(r ledger.ReplayCandidate) string {
	switch {
	case r.Reason == string(identity.ReasonUnstorable):
		return "the database refused it at ingest: only its size and SHA-256 were kept"
	case r.Reason == string(identity.ReasonInvalidHeader):
		return "its NATS header block did not parse and was not kept, so the delivery-key header cannot be checked again"
	case r.Truncated || len(r.Raw) != r.Size:
		return fmt.Sprintf("only the first %d of its %d bytes were kept", len(r.Raw), r.Size)
	}
	if sum := sha256.Sum256(r.Raw); r.SHA256 != nil && !bytes.Equal(sum[:], r.SHA256) {
		return "its stored bytes do not match the SHA-256 recorded with them"
	}
	return ""
}

// ReplayTotals counts a replay's outcomes.
type ReplayTotals struct {
	Created       int `json:"created"`
	AlreadyStored int `json:"already_stored"`
	Refused       int `json:"refused"`
	Skipped       int `json:"skipped"`
	NotReplayable int `json:"not_replayable"`
}

// Add counts one outcome.
func (t *ReplayTotals) Add(outcome string) {
	switch outcome {
	case string(ledger.ReplayCreated):
		t.Created++
	case string(ledger.ReplayAlreadyStored):
		t.AlreadyStored++
	case string(ledger.ReplayRefused):
		t.Refused++
	case string(ledger.ReplaySkipped):
		t.Skipped++
	default:
		t.NotReplayable++
	}
}

// Sum is how many rejects were counted.
func (t ReplayTotals) Sum() int {
	return t.Created + t.AlreadyStored + t.Refused + t.Skipped + t.NotReplayable
}

// Created lists the intents a replay created, for the relay to publish their events and work
// items right away; a dry run created none.
func Created(replayed []Replayed, dryRun bool) []identity.DeliveryKey {
	if dryRun {
		return nil
	}
	var keys []identity.DeliveryKey
	for _, r := range replayed {
		if r.Result.Outcome == ledger.ReplayCreated && r.Result.Key != nil {
			keys = append(keys, *r.Result.Key)
		}
	}
	return keys
}
