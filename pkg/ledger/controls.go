package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// GlobalScope names the global kill switch and the default policy.
const GlobalScope = ""

// Switch is a kill switch. Scope is GlobalScope or an account id.
type Switch struct {
	Scope     string
	Engaged   bool
	Reason    string
	Actor     string
	UpdatedAt time.Time
}

// SetSwitch turns a kill switch on (engaged) or off. An engaged switch stops every
// authorization in its scope from the next Authorize on; work already authorized is not
// recalled (its outcome or its lease decides).
func (l *Ledger) SetSwitch(ctx context.Context, scope string, engaged bool, actor, reason string) (Switch, error) {
	if strings.TrimSpace(actor) == "" {
		return Switch{}, errors.New("set switch: an operator must be named")
	}
	var row dbsqlc.Switch
	err := l.inTx(ctx, "switch", func(q *dbsqlc.Queries) (err error) {
		row, err = q.SwitchSet(ctx, dbsqlc.SwitchSetParams{Scope: scope, Engaged: engaged, Reason: reason, Actor: actor})
		return err
	})
	if err != nil {
		return Switch{}, fmt.Errorf("set switch %q: %w", scope, err)
	}
	return Switch{row.Scope, row.Engaged, row.Reason, row.Actor, row.UpdatedAt}, nil
}

// Switches lists every kill switch ever set.
func (l *Ledger) Switches(ctx context.Context) ([]Switch, error) {
	var rows []dbsqlc.Switch
	err := l.inTx(ctx, "switch", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.SwitchesList(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list switches: %w", err)
	}
	out := make([]Switch, len(rows))
	for i, r := range rows {
		out[i] = Switch{r.Scope, r.Engaged, r.Reason, r.Actor, r.UpdatedAt}
	}
	return out, nil
}

// Stopped reports whether a kill switch (the account's or the global one) stops the account
// now: the dispatcher's cheap look before Begin, so a long stop creates no attempts.
func (l *Ledger) Stopped(ctx context.Context, account string) (bool, error) {
	var stopped bool
	err := l.inTx(ctx, "switch", func(q *dbsqlc.Queries) (err error) {
		stopped, err = q.SwitchEngagedFor(ctx, account)
		return err
	})
	return stopped, err
}

// Policy is the policy in force for an account.
type Policy struct {
	AttemptCap       int
	BackoffBase      time.Duration
	BackoffMax       time.Duration
	RatePerMinute    int // 0 means unlimited
	RateBurst        int
	TextWindow       time.Duration
	RetryableReasons []Reason
}

// PolicyFor returns the policy in force for account (GlobalScope: the default).
func (l *Ledger) PolicyFor(ctx context.Context, account string) (Policy, error) {
	var r dbsqlc.PolicyEffectiveRow
	err := l.inTx(ctx, "policy", func(q *dbsqlc.Queries) (err error) {
		r, err = q.PolicyEffective(ctx, account)
		return err
	})
	if err != nil {
		return Policy{}, fmt.Errorf("policy for %q: %w", account, err)
	}
	p := Policy{
		AttemptCap:    int(r.AttemptCap),
		BackoffBase:   time.Duration(r.BackoffBaseMs) * time.Millisecond,
		BackoffMax:    time.Duration(r.BackoffMaxMs) * time.Millisecond,
		RatePerMinute: int(r.RatePerMinute),
		RateBurst:     int(r.RateBurst),
		TextWindow:    time.Duration(r.TextWindowSeconds) * time.Second,
	}
	for _, s := range r.RetryableReasons {
		p.RetryableReasons = append(p.RetryableReasons, Reason(s))
	}
	return p, nil
}

// PolicyOverride is an account's policy row: nil fields inherit the default. For GlobalScope
// every field must be set.
type PolicyOverride struct {
	AttemptCap       *int
	BackoffBase      *time.Duration
	BackoffMax       *time.Duration
	RatePerMinute    *int
	RateBurst        *int
	TextWindow       *time.Duration
	RetryableReasons []Reason // nil inherits
}

// SetPolicy replaces the policy row of scope. Every retryable reason must be a failed-state
// reason: nothing else may ever be retried.
func (l *Ledger) SetPolicy(ctx context.Context, scope string, p PolicyOverride, actor string) error {
	if strings.TrimSpace(actor) == "" {
		return errors.New("set policy: an operator must be named")
	}
	var reasons []string
	if p.RetryableReasons != nil {
		reasons = []string{}
		for _, r := range p.RetryableReasons {
			if rule, ok := r.Rule(); !ok || rule.State != Failed {
				return fmt.Errorf("set policy: %q is not a reason of the failed state, so it can never be retried", r)
			}
			reasons = append(reasons, string(r))
		}
	}
	int4 := func(v *int) pgtype.Int4 {
		if v == nil {
			return pgtype.Int4{}
		}
		return pgtype.Int4{Int32: int32(*v), Valid: true}
	}
	ms := func(d *time.Duration) pgtype.Int8 {
		if d == nil {
			return pgtype.Int8{}
		}
		return pgtype.Int8{Int64: d.Milliseconds(), Valid: true}
	}
	var window pgtype.Int8
	if p.TextWindow != nil {
		window = pgtype.Int8{Int64: int64(p.TextWindow.Seconds()), Valid: true}
	}
	err := l.inTx(ctx, "policy", func(q *dbsqlc.Queries) error {
		return q.PolicySet(ctx, dbsqlc.PolicySetParams{
			Scope: scope, AttemptCap: int4(p.AttemptCap), BackoffBaseMs: ms(p.BackoffBase), BackoffMaxMs: ms(p.BackoffMax),
			RatePerMinute: int4(p.RatePerMinute), RateBurst: int4(p.RateBurst), TextWindowSeconds: window,
			RetryableReasons: reasons, Actor: actor,
		})
	})
	if err != nil {
		return fmt.Errorf("set policy %q: %w", scope, err)
	}
	return nil
}

// AdvanceSourceHead makes version the stored head of its source, superseding whatever head is
// stored (resolve to the stored head: never refused because a head exists). Intents resting on
// an older version are parked superseded_source at their next Authorize. It returns the
// version it replaced and whether anything changed.
func (l *Ledger) AdvanceSourceHead(ctx context.Context, sourceID string, version identity.SourceVersion, raw identity.RawHash) (replaced *identity.SourceVersion, changed bool, err error) {
	var row dbsqlc.SourceHeadAdvanceRow
	var rawBytes []byte
	if !raw.IsZero() {
		rawBytes = raw.Bytes()
	}
	err = l.inTx(ctx, "source head", func(q *dbsqlc.Queries) (err error) {
		row, err = q.SourceHeadAdvance(ctx, dbsqlc.SourceHeadAdvanceParams{SourceID: sourceID, HeadVersion: version.Bytes(), RawHash: rawBytes})
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("advance source head of %s: %w", sourceID, err)
	}
	if row.Replaced != nil {
		v, err := identity.SourceVersionFromBytes(row.Replaced)
		if err != nil {
			return nil, false, err
		}
		replaced = &v
	}
	return replaced, row.Changed, nil
}

// ListByState returns up to max intents in state, in delivery-key order after the key after
// (the zero key to start).
func (l *Ledger) ListByState(ctx context.Context, state State, after identity.DeliveryKey, max int) ([]Intent, error) {
	if !state.Valid() {
		return nil, fmt.Errorf("list: %q is not a state", state)
	}
	var rows []dbsqlc.Intent
	err := l.inTx(ctx, "list", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.IntentsByState(ctx, dbsqlc.IntentsByStateParams{State: string(state), AfterKey: after.Bytes(), MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", state, err)
	}
	out := make([]Intent, 0, len(rows))
	for _, r := range rows {
		in, err := intentFromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}
