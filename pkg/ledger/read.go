package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// Intent is an intent as the ledger holds it.
type Intent struct {
	Key        identity.DeliveryKey
	Account    string
	Action     string
	Target     string
	Request    string // canonical JSON
	Occurrence string
	// SourceID names the source the intent rests on ("" when it rests on none); whether its
	// version is still the source's stored head is the freshness fence's question (Superseded).
	SourceID string
	// ReplyTo names the parent of a reply (envelope reply_to); zero for an intent with a
	// literal Target.
	ReplyTo identity.DeliveryKey
	State   State
	Reason  Reason
	// Seq is the number of the intent's latest history row.
	Seq                int64
	AttemptsAuthorized int
	// Token, Epoch and Generation name the latest attempt (zero when there was none).
	Token      identity.AttemptToken
	Epoch      int64
	Generation int64
	// LeaseExpiresAt is set while an attempt holds a lease.
	LeaseExpiresAt *time.Time
	ObjectID       string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// TraceParent is the W3C traceparent the intent was stored with (pkg/tracecontext), ""
	// for none: tracing only, never part of what is sent or decided.
	TraceParent string
	// NotBefore and ExpiresAt are the envelope's times as first stored (nil for none): Begin
	// and Authorize wait for the one and park the intent expired from the other.
	NotBefore, ExpiresAt *time.Time
}

// Attempt is one immutable attempt row.
type Attempt struct {
	Token             identity.AttemptToken
	RequestHash       []byte
	CredentialVersion int64
	Epoch             int64
	Generation        int64
	CreatedAt         time.Time
}

// Evidence is one report about an attempt.
type Evidence struct {
	Token      identity.AttemptToken
	Epoch      int64
	Generation int64
	Result     string // success, not_sent, unknown, abandoned
	Reason     Reason
	ObjectID   string
	Fenced     bool
	Detail     []byte
	RecordedAt time.Time
}

// Transition is one history row.
type Transition struct {
	Seq        int64
	From       State // "" for creation
	To         State
	Reason     Reason
	Token      *identity.AttemptToken
	Epoch      int64
	Generation int64
	Actor      string
	Detail     []byte
	At         time.Time
}

// ReconciliationStep is one row of an attempt's reconciliation: the claim of its one lookup
// (Step "claimed", written before the lookup is made) and what the lookup found (Step
// "resolved", Result found, not_found, not_sent or unavailable).
type ReconciliationStep struct {
	Token    identity.AttemptToken
	Step     string
	Result   string // "" for a claim
	ObjectID string
	Actor    string
	Detail   []byte
	At       time.Time
}

// Record is an intent with everything the ledger knows about it.
type Record struct {
	Intent          Intent
	Attempts        []Attempt
	Evidence        []Evidence
	Transitions     []Transition
	Reconciliations []ReconciliationStep
}

// Get returns one intent, or ErrNotFound.
func (l *Ledger) Get(ctx context.Context, key identity.DeliveryKey) (Intent, error) {
	var row dbsqlc.Intent
	err := l.snapshot(ctx, "get", func(q *dbsqlc.Queries) (err error) {
		row, err = q.IntentGet(ctx, key.Bytes())
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Intent{}, ErrNotFound
	}
	if err != nil {
		return Intent{}, fmt.Errorf("get %s: %w", key, err)
	}
	return intentFromRow(row)
}

// Inspect returns an intent with its attempts, evidence, history and reconciliation steps,
// read in one transaction so they agree with each other.
func (l *Ledger) Inspect(ctx context.Context, key identity.DeliveryKey) (Record, error) {
	var rec Record
	err := l.snapshot(ctx, "inspect", func(q *dbsqlc.Queries) error {
		rec = Record{}
		row, err := q.IntentGet(ctx, key.Bytes())
		if err != nil {
			return err
		}
		if rec.Intent, err = intentFromRow(row); err != nil {
			return err
		}
		attempts, err := q.AttemptsByIntent(ctx, key.Bytes())
		if err != nil {
			return err
		}
		for _, a := range attempts {
			token, err := identity.AttemptTokenFromBytes(a.AttemptToken)
			if err != nil {
				return err
			}
			rec.Attempts = append(rec.Attempts, Attempt{token, a.RequestHash, a.CredentialVersion, a.Epoch, a.Generation, a.CreatedAt})
		}
		evidence, err := q.EvidenceByIntent(ctx, key.Bytes())
		if err != nil {
			return err
		}
		for _, e := range evidence {
			token, err := identity.AttemptTokenFromBytes(e.AttemptToken)
			if err != nil {
				return err
			}
			rec.Evidence = append(rec.Evidence, Evidence{token, e.Epoch, e.Generation, e.Outcome, Reason(e.Reason), e.ObjectID.String, e.Fenced, e.Detail, e.RecordedAt})
		}
		history, err := q.HistoryByIntent(ctx, key.Bytes())
		if err != nil {
			return err
		}
		for _, h := range history {
			t := Transition{Seq: h.Seq, From: State(h.FromState.String), To: State(h.ToState), Reason: Reason(h.Reason),
				Epoch: h.Epoch.Int64, Generation: h.Generation.Int64, Actor: h.Actor, Detail: h.Detail, At: h.At}
			if h.AttemptToken != nil {
				token, err := identity.AttemptTokenFromBytes(h.AttemptToken)
				if err != nil {
					return err
				}
				t.Token = &token
			}
			rec.Transitions = append(rec.Transitions, t)
		}
		steps, err := q.ReconciliationsByIntent(ctx, key.Bytes())
		if err != nil {
			return err
		}
		for _, r := range steps {
			token, err := identity.AttemptTokenFromBytes(r.AttemptToken)
			if err != nil {
				return err
			}
			rec.Reconciliations = append(rec.Reconciliations, ReconciliationStep{token, r.Step, r.Result.String, r.ObjectID.String, r.Actor, r.Detail, r.At})
		}
		return nil
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("inspect %s: %w", key, err)
	}
	return rec, nil
}

func intentFromRow(r dbsqlc.Intent) (Intent, error) {
	key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
	if err != nil {
		return Intent{}, err
	}
	in := Intent{
		Key: key, Account: r.AccountID, Action: r.Action, Target: r.Target, Request: r.Request,
		Occurrence: r.Occurrence, SourceID: r.SourceID.String, State: State(r.State), Reason: Reason(r.Reason), Seq: r.TransitionSeq,
		AttemptsAuthorized: int(r.AttemptsAuthorized), Epoch: r.Epoch.Int64, Generation: r.Generation.Int64,
		LeaseExpiresAt: r.LeaseExpiresAt, ObjectID: r.ObjectID.String, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		TraceParent: r.Traceparent.String, NotBefore: r.NotBefore, ExpiresAt: r.ExpiresAt,
	}
	if r.AttemptToken != nil {
		if in.Token, err = identity.AttemptTokenFromBytes(r.AttemptToken); err != nil {
			return Intent{}, err
		}
	}
	if r.ReplyTo != nil {
		if in.ReplyTo, err = identity.DeliveryKeyFromBytes(r.ReplyTo); err != nil {
			return Intent{}, err
		}
	}
	return in, nil
}

// GetMany returns the intents of keys that exist, by key, in one read: the dispatcher's look at
// a batch of work before it opens attempts. A key without an intent is absent from the map.
func (l *Ledger) GetMany(ctx context.Context, keys []identity.DeliveryKey) (map[identity.DeliveryKey]Intent, error) {
	var rows []dbsqlc.Intent
	err := l.readOne(ctx, "get", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsGetMany(ctx, rawKeys(keys))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get %d intents: %w", len(keys), err)
	}
	out := make(map[identity.DeliveryKey]Intent, len(rows))
	for _, r := range rows {
		in, err := intentFromRow(r)
		if err != nil {
			return nil, fmt.Errorf("get %d intents: %w", len(keys), err)
		}
		out[in.Key] = in
	}
	return out, nil
}

// Outstanding counts the intents not published, by state: those that may still move (pending,
// authorized, failed, indeterminate) and those that wait for a person (parked), each through an
// index that holds only them.
func (l *Ledger) Outstanding(ctx context.Context) (map[State]int64, error) {
	var r dbsqlc.IntentsOutstandingRow
	err := l.scan(ctx, "outstanding intents", func(q *dbsqlc.Queries) (err error) {
		r, err = q.IntentsOutstanding(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return map[State]int64{Pending: r.Pending, Authorized: r.Authorized, Failed: r.Failed, Indeterminate: r.Indeterminate, Parked: r.Parked}, nil
}
