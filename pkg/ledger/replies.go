package ledger

import (
	"context"
	"fmt"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// This file holds replies and threads: an intent whose envelope names reply_to (its parent's
// delivery key) instead of a target. It is sent only once its parent is published, to the
// object the parent created; Authorize refuses it until then (awaiting_parent: the claim ends,
// no attempt is spent), and it is parked dependency_unmet when its parent ends without a
// publication. Nothing polls a waiting reply: the relay publishes its work again when its
// parent's end is relayed (WaitingReplies).

// Parent is what a reply needs of its parent: whether it is published, and the object it
// created (ObjectID, set once published).
type Parent struct {
	Key      identity.DeliveryKey
	State    State
	Reason   Reason
	ObjectID string
}

// Parents returns the intents among keys that exist, by key, in one read: the dispatcher's
// look at the parents of a batch's replies. A key without an intent is absent from the map.
func (l *Ledger) Parents(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]Parent, error) {
	var rows []dbsqlc.IntentsParentsRow
	err := l.readOne(ctx, "parents", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsParents(ctx, rawKeys(keys))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read %d parents: %w", len(keys), err)
	}
	out := make(map[identity.DeliveryKey]Parent, len(rows))
	for _, r := range rows {
		key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("read %d parents: %w", len(keys), err)
		}
		out[key] = Parent{Key: key, State: State(r.State), Reason: Reason(r.Reason), ObjectID: r.ObjectID.String}
	}
	return out, nil
}

// Unmet reports whether a parent in this state can never be published by a machine: parked,
// or failed (whether its policy retries it, ParkDependencyUnmet's statement decides).
func (p Parent) Unmet() bool { return p.State == Parked || p.State == Failed }

// ParkDependencyUnmet parks the pending replies among keys whose parent ended without being
// published (dependency_unmet): parked, or failed for a reason its account's policy does not
// retry, or at its attempt cap. No attempt is opened and nothing is sent. Only a reply that is
// pending, held by nobody and whose parent is so (tested in the statement that changes it) is
// parked; it returns those it parked, and the others are left as they are (a parent failed for
// a reason its policy retries may still be published).
func (l *Ledger) ParkDependencyUnmet(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]bool, error) {
	if _, err := indexKeys(len(keys), func(i int) identity.DeliveryKey { return keys[i] }); err != nil {
		return nil, fmt.Errorf("park dependency unmet: %w", err)
	}
	var rows [][]byte
	err := l.inTx(ctx, string(OpPark), func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsParkDependencyUnmet(ctx, dbsqlc.IntentsParkDependencyUnmetParams{
			DeliveryKeys: rawKeys(keys), AlwaysRetried: alwaysRetried(), Actor: l.cfg.Actor})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("park %d replies whose parent ended: %w", len(keys), err)
	}
	return keySet(rows)
}

// WaitingReply is a pending reply, held by nobody, whose parent is among those asked for: the
// relay publishes a work item for it.
type WaitingReply struct {
	Key         identity.DeliveryKey
	Parent      identity.DeliveryKey
	Account     string
	Seq         int64
	TraceParent string
}

// WaitingReplies returns the replies that wait for any of parents (pending, no claim), through
// intents_reply_to_idx.
func (l *Ledger) WaitingReplies(ctx context.Context, parents []identity.DeliveryKey) ([]WaitingReply, error) {
	var rows []dbsqlc.IntentsWaitingRepliesRow
	err := l.readOne(ctx, "waiting replies", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsWaitingReplies(ctx, rawKeys(parents))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("replies waiting for %d parents: %w", len(parents), err)
	}
	out := make([]WaitingReply, 0, len(rows))
	for _, r := range rows {
		key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("replies waiting for %d parents: %w", len(parents), err)
		}
		parent, err := identity.DeliveryKeyFromBytes(r.ReplyTo)
		if err != nil {
			return nil, fmt.Errorf("replies waiting for %d parents: %w", len(parents), err)
		}
		out = append(out, WaitingReply{Key: key, Parent: parent, Account: r.AccountID, Seq: r.TransitionSeq, TraceParent: r.Traceparent.String})
	}
	return out, nil
}
