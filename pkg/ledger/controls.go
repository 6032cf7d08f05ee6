package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
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

// SwitchChange is what SetSwitch did: Before is nil when the switch had never been set (it
// was off).
type SwitchChange struct {
	Before *Switch
	After  Switch
}

// Actor is who makes a change of the controls (a switch, a policy, an account, an operator, the
// epoch) and why: the control history records both with the change. Name is held to MaxActor
// and Reason to CheckNote's rules, as each method says.
type Actor struct {
	Name   string // the operator or process, as history names it
	Reason string // why, in the operator's words
}

// SetSwitch turns a kill switch on (engaged) or off, and appends the change to the control
// history with actor and reason in the same statement. An engaged switch stops every
// authorization in its scope from the next Authorize on; work already authorized is not
// recalled (its outcome or its lease decides). scope is GlobalScope or a configured account
// (else ErrUnknownAccount). Setting a switch to the state it is in still records who said so
// and why.
func (l *Ledger) SetSwitch(ctx context.Context, scope string, engaged bool, by Actor) (SwitchChange, error) {
	actor, reason := by.Name, by.Reason
	if strings.TrimSpace(actor) == "" {
		return SwitchChange{}, errors.New("set switch: an operator must be named")
	}
	if err := checkChange(actor, "reason", reason); err != nil {
		return SwitchChange{}, fmt.Errorf("set switch %q: %w", scope, err)
	}
	var row dbsqlc.SwitchSetRow
	err := l.inTx(ctx, "switch", func(q *dbsqlc.Queries) (err error) {
		// At READ COMMITTED a switch created by another operator after this statement's
		// snapshot leaves it unchanged (it never records a wrong before); the next statement
		// sees that switch, so the change is made again on top of it. An emergency stop must
		// not fail because two operators pulled it at once.
		for range 3 {
			row, err = q.SwitchSet(ctx, dbsqlc.SwitchSetParams{Scope: scope, Engaged: engaged, Reason: reason, Actor: actor})
			if err != nil || !row.Known || row.Changed {
				return err
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return SwitchChange{}, fmt.Errorf("set switch %q: %w", scope, err)
	case !row.Known:
		return SwitchChange{}, fmt.Errorf("set switch %q: %w", scope, ErrUnknownAccount)
	case !row.Changed || row.AfterUpdatedAt == nil:
		return SwitchChange{}, fmt.Errorf("set switch %q: %w", scope, ErrControlRaced)
	}
	change := SwitchChange{After: Switch{scope, row.AfterEngaged.Bool, reason, actor, *row.AfterUpdatedAt}}
	if row.BeforeEngaged.Valid && row.BeforeUpdatedAt != nil {
		change.Before = &Switch{scope, row.BeforeEngaged.Bool, row.BeforeReason.String, row.BeforeActor.String, *row.BeforeUpdatedAt}
	}
	return change, nil
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
	// BackoffFactor multiplies a failed intent's retry delay at each attempt (and a holding
	// account's wait between probes at each failed probe); 1 keeps it constant.
	BackoffFactor float64
	// TripFailures consecutive definitive failures that say the platform cannot take anything
	// now hold the account.
	TripFailures int
	// More than TripUnknowns unknown outcomes within TripWindow hold the account.
	TripUnknowns int
	TripWindow   time.Duration
	// ProbeBase is a holding account's first wait before a probe, ProbeMax its longest.
	ProbeBase time.Duration
	ProbeMax  time.Duration
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
		BackoffFactor: r.BackoffFactor,
		TripFailures:  int(r.TripFailures),
		TripUnknowns:  int(r.TripUnknowns),
		TripWindow:    time.Duration(r.TripWindowSeconds) * time.Second,
		ProbeBase:     time.Duration(r.ProbeBaseMs) * time.Millisecond,
		ProbeMax:      time.Duration(r.ProbeMaxMs) * time.Millisecond,
	}
	for _, s := range r.RetryableReasons {
		p.RetryableReasons = append(p.RetryableReasons, Reason(s))
	}
	return p, nil
}

// PolicyOverride is one policy row's settings: for an account, nil fields inherit the
// default; for GlobalScope (the default itself) every field is set.
type PolicyOverride struct {
	AttemptCap       *int
	BackoffBase      *time.Duration
	BackoffMax       *time.Duration
	RatePerMinute    *int
	RateBurst        *int
	TextWindow       *time.Duration
	RetryableReasons []Reason // nil inherits; empty retries nothing by policy
	BackoffFactor    *float64
	TripFailures     *int
	TripUnknowns     *int
	TripWindow       *time.Duration
	ProbeBase        *time.Duration
	ProbeMax         *time.Duration
}

// Over returns the policy in force when o overrides def: o's fields where set, def's elsewhere.
func (o PolicyOverride) Over(def Policy) Policy {
	p := def
	if o.AttemptCap != nil {
		p.AttemptCap = *o.AttemptCap
	}
	if o.BackoffBase != nil {
		p.BackoffBase = *o.BackoffBase
	}
	if o.BackoffMax != nil {
		p.BackoffMax = *o.BackoffMax
	}
	if o.RatePerMinute != nil {
		p.RatePerMinute = *o.RatePerMinute
	}
	if o.RateBurst != nil {
		p.RateBurst = *o.RateBurst
	}
	if o.TextWindow != nil {
		p.TextWindow = *o.TextWindow
	}
	if o.RetryableReasons != nil {
		p.RetryableReasons = o.RetryableReasons
	}
	if o.BackoffFactor != nil {
		p.BackoffFactor = *o.BackoffFactor
	}
	if o.TripFailures != nil {
		p.TripFailures = *o.TripFailures
	}
	if o.TripUnknowns != nil {
		p.TripUnknowns = *o.TripUnknowns
	}
	if o.TripWindow != nil {
		p.TripWindow = *o.TripWindow
	}
	if o.ProbeBase != nil {
		p.ProbeBase = *o.ProbeBase
	}
	if o.ProbeMax != nil {
		p.ProbeMax = *o.ProbeMax
	}
	return p
}

// PolicyField names one field of a policy row, for PolicyEdit.Inherit.
type PolicyField string

// The policy fields, in the order operators see them.
const (
	FieldAttemptCap       PolicyField = "attempt_cap"
	FieldBackoffBase      PolicyField = "backoff_base"
	FieldBackoffMax       PolicyField = "backoff_max"
	FieldRatePerMinute    PolicyField = "rate_per_minute"
	FieldRateBurst        PolicyField = "rate_burst"
	FieldTextWindow       PolicyField = "text_window"
	FieldRetryableReasons PolicyField = "retryable_reasons"
	FieldBackoffFactor    PolicyField = "backoff_factor"
	FieldTripFailures     PolicyField = "trip_failures"
	FieldTripUnknowns     PolicyField = "trip_unknowns"
	FieldTripWindow       PolicyField = "trip_window"
	FieldProbeBase        PolicyField = "probe_base"
	FieldProbeMax         PolicyField = "probe_max"
)

// The limits of the health fields (SetPolicy refuses values outside them, as the policies
// table's CHECK constraints do): a backoff factor of 1 keeps the delay constant, and one above
// MaxBackoffFactor reaches any maximum within a few attempts, which is no backoff at all.
const (
	MinBackoffFactor = 1.0
	MaxBackoffFactor = 10.0
)

// PolicyFields lists every PolicyField.
func PolicyFields() []PolicyField { return slices.Clone(policyFields) }

var policyFields = []PolicyField{FieldAttemptCap, FieldBackoffBase, FieldBackoffMax, FieldBackoffFactor, FieldRatePerMinute, FieldRateBurst,
	FieldTextWindow, FieldRetryableReasons, FieldTripFailures, FieldTripUnknowns, FieldTripWindow, FieldProbeBase, FieldProbeMax}

// PolicyEdit changes some fields of one policy row and leaves the others as they are.
type PolicyEdit struct {
	// Set holds the fields to set; nil fields keep their value.
	Set PolicyOverride
	// Inherit names fields to clear, so that the account inherits the default's value. Refused
	// for GlobalScope, whose every field stays set, and for a field Set also sets.
	Inherit []PolicyField
}

// PolicyRow is one row of the policy table: the default (Scope GlobalScope) or an account's
// overrides.
type PolicyRow struct {
	Scope string
	PolicyOverride
	UpdatedBy string
	UpdatedAt time.Time
}

// PolicyChange is what SetPolicy did: Before is nil when the account had no policy row of its
// own (it inherited every field).
type PolicyChange struct {
	Before *PolicyOverride
	After  PolicyOverride
}

// SetPolicy applies edit to the policy row of scope (GlobalScope or a configured account, else
// ErrUnknownAccount) and appends the change, before and after, to the control history with
// actor and reason in the same statement. Fields the edit does not name keep the values of the
// row as it stands when the statement runs, so operators changing different fields never undo
// each other. Every value must lie in its range and every retryable reason must be a
// failed-state reason: nothing else may ever be retried.
func (l *Ledger) SetPolicy(ctx context.Context, scope string, edit PolicyEdit, by Actor) (PolicyChange, error) {
	actor, reason := by.Name, by.Reason
	if strings.TrimSpace(actor) == "" {
		return PolicyChange{}, errors.New("set policy: an operator must be named")
	}
	if err := checkChange(actor, "reason", reason); err != nil {
		return PolicyChange{}, fmt.Errorf("set policy %q: %w", scope, err)
	}
	params, err := policySetParams(scope, edit)
	if err != nil {
		return PolicyChange{}, fmt.Errorf("set policy %q: %w", scope, err)
	}
	params.Actor, params.Reason = actor, reason
	var row dbsqlc.PolicySetRow
	err = l.inTx(ctx, "policy", func(q *dbsqlc.Queries) (err error) {
		// As for SetSwitch: a row created meanwhile by another operator is changed on top of.
		for range 3 {
			row, err = q.PolicySet(ctx, params)
			if err != nil || !row.Known || row.Changed {
				return err
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return PolicyChange{}, fmt.Errorf("set policy %q: %w", scope, err)
	case !row.Known:
		return PolicyChange{}, fmt.Errorf("set policy %q: %w", scope, ErrUnknownAccount)
	case !row.Changed:
		return PolicyChange{}, fmt.Errorf("set policy %q: %w", scope, ErrControlRaced)
	}
	var change PolicyChange
	if change.After, err = policyFromJSON(row.After); err != nil {
		return PolicyChange{}, err
	}
	if row.Before != nil {
		before, err := policyFromJSON(row.Before)
		if err != nil {
			return PolicyChange{}, err
		}
		change.Before = &before
	}
	return change, nil
}

// Check reports what SetPolicy would refuse in edit for scope before it reaches the database: a
// value out of its range, a reason that can never be retried, a field both set and inherited,
// or a field the default policy would inherit. It does not know whether the account exists.
func (e PolicyEdit) Check(scope string) error {
	_, err := policySetParams(scope, e)
	return err
}

// policySetParams checks edit and turns it into the statement's set flags and values.
func policySetParams(scope string, edit PolicyEdit) (dbsqlc.PolicySetParams, error) {
	p := dbsqlc.PolicySetParams{Scope: scope}
	set := edit.Set
	if set.AttemptCap != nil {
		if *set.AttemptCap < 1 || *set.AttemptCap > math.MaxInt32 {
			return p, fmt.Errorf("attempt cap %d: it must be at least 1", *set.AttemptCap)
		}
		p.SetAttemptCap, p.AttemptCap = true, pgtype.Int4{Int32: int32(*set.AttemptCap), Valid: true}
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		flag *bool
		out  *pgtype.Int8
		unit time.Duration
	}{
		{"backoff base", set.BackoffBase, &p.SetBackoffBaseMs, &p.BackoffBaseMs, time.Millisecond},
		{"backoff max", set.BackoffMax, &p.SetBackoffMaxMs, &p.BackoffMaxMs, time.Millisecond},
		{"text window", set.TextWindow, &p.SetTextWindowSeconds, &p.TextWindowSeconds, time.Second},
	} {
		if d.v == nil {
			continue
		}
		if *d.v < 0 || *d.v%d.unit != 0 {
			return p, fmt.Errorf("%s %s: it must be a non-negative whole number of %s", d.name, *d.v, unitName(d.unit))
		}
		*d.flag, *d.out = true, pgtype.Int8{Int64: int64(*d.v / d.unit), Valid: true}
	}
	// The health's waits: a zero would probe a platform that is down without pause, and a zero
	// window would count no unknown outcome at all.
	for _, d := range []struct {
		name string
		v    *time.Duration
		flag *bool
		out  *pgtype.Int8
		unit time.Duration
	}{
		{"trip window", set.TripWindow, &p.SetTripWindowSeconds, &p.TripWindowSeconds, time.Second},
		{"probe base", set.ProbeBase, &p.SetProbeBaseMs, &p.ProbeBaseMs, time.Millisecond},
		{"probe max", set.ProbeMax, &p.SetProbeMaxMs, &p.ProbeMaxMs, time.Millisecond},
	} {
		if d.v == nil {
			continue
		}
		if *d.v < d.unit || *d.v%d.unit != 0 {
			return p, fmt.Errorf("%s %s: it must be a whole number of %s, at least 1", d.name, *d.v, unitName(d.unit))
		}
		*d.flag, *d.out = true, pgtype.Int8{Int64: int64(*d.v / d.unit), Valid: true}
	}
	if set.BackoffFactor != nil {
		f := *set.BackoffFactor
		if !(f >= MinBackoffFactor && f <= MaxBackoffFactor) { // also refuses NaN
			return p, fmt.Errorf("backoff factor %g: it must lie between %g (a constant delay) and %g", f, MinBackoffFactor, MaxBackoffFactor)
		}
		p.SetBackoffFactor, p.BackoffFactor = true, pgtype.Float8{Float64: f, Valid: true}
	}
	if set.TripFailures != nil {
		if *set.TripFailures < 1 || *set.TripFailures > math.MaxInt32 {
			return p, fmt.Errorf("trip failures %d: it must be at least 1 (the consecutive failures that hold the account)", *set.TripFailures)
		}
		p.SetTripFailures, p.TripFailures = true, pgtype.Int4{Int32: int32(*set.TripFailures), Valid: true}
	}
	if set.TripUnknowns != nil {
		if *set.TripUnknowns < 0 || *set.TripUnknowns > math.MaxInt32 {
			return p, fmt.Errorf("trip unknowns %d: it must be at least 0 (more unknown outcomes than this within the trip window hold the account)", *set.TripUnknowns)
		}
		p.SetTripUnknowns, p.TripUnknowns = true, pgtype.Int4{Int32: int32(*set.TripUnknowns), Valid: true}
	}
	if set.RatePerMinute != nil {
		if *set.RatePerMinute < 0 || *set.RatePerMinute > math.MaxInt32 {
			return p, fmt.Errorf("rate %d a minute: it must be at least 0 (0 is unlimited)", *set.RatePerMinute)
		}
		p.SetRatePerMinute, p.RatePerMinute = true, pgtype.Int4{Int32: int32(*set.RatePerMinute), Valid: true}
	}
	if set.RateBurst != nil {
		if *set.RateBurst < 1 || *set.RateBurst > math.MaxInt32 {
			return p, fmt.Errorf("rate burst %d: it must be at least 1", *set.RateBurst)
		}
		p.SetRateBurst, p.RateBurst = true, pgtype.Int4{Int32: int32(*set.RateBurst), Valid: true}
	}
	if set.RetryableReasons != nil {
		p.SetRetryableReasons, p.RetryableReasons = true, []string{}
		for _, r := range set.RetryableReasons {
			if rule, ok := r.Rule(); !ok || rule.State != Failed {
				return p, fmt.Errorf("%q is not a reason of the failed state, so it can never be retried (failed-state reasons: %s)", r, strings.Join(reasonNames(FailedReasons()), ", "))
			} else if rule.Retry != RetryByPolicy {
				return p, fmt.Errorf("%q is retried always (its intents wait for an operator's change), so no policy governs it (the policy governs: %s)", r, strings.Join(reasonNames(GovernedReasons()), ", "))
			}
			p.RetryableReasons = append(p.RetryableReasons, string(r))
		}
	}
	for _, f := range edit.Inherit {
		if scope == GlobalScope {
			return p, fmt.Errorf("the default policy cannot inherit %s: it must set every field", f)
		}
		var flag *bool
		switch f {
		case FieldAttemptCap:
			flag = &p.SetAttemptCap
		case FieldBackoffBase:
			flag = &p.SetBackoffBaseMs
		case FieldBackoffMax:
			flag = &p.SetBackoffMaxMs
		case FieldRatePerMinute:
			flag = &p.SetRatePerMinute
		case FieldRateBurst:
			flag = &p.SetRateBurst
		case FieldTextWindow:
			flag = &p.SetTextWindowSeconds
		case FieldRetryableReasons:
			flag = &p.SetRetryableReasons
		case FieldBackoffFactor:
			flag = &p.SetBackoffFactor
		case FieldTripFailures:
			flag = &p.SetTripFailures
		case FieldTripUnknowns:
			flag = &p.SetTripUnknowns
		case FieldTripWindow:
			flag = &p.SetTripWindowSeconds
		case FieldProbeBase:
			flag = &p.SetProbeBaseMs
		case FieldProbeMax:
			flag = &p.SetProbeMaxMs
		default:
			return p, fmt.Errorf("%q is not a policy field", f)
		}
		if *flag {
			return p, fmt.Errorf("%s is both set and inherited", f)
		}
		*flag = true // with a NULL value: the column inherits
	}
	return p, nil
}

func unitName(d time.Duration) string {
	if d == time.Second {
		return "seconds"
	}
	return "milliseconds"
}

func reasonNames(rs []Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// policyJSON is a policy row as control_history holds it: the table's columns, NULL inherited.
type policyJSON struct {
	AttemptCap        *int     `json:"attempt_cap"`
	BackoffBaseMs     *int64   `json:"backoff_base_ms"`
	BackoffMaxMs      *int64   `json:"backoff_max_ms"`
	RatePerMinute     *int     `json:"rate_per_minute"`
	RateBurst         *int     `json:"rate_burst"`
	TextWindowSeconds *int64   `json:"text_window_seconds"`
	RetryableReasons  []string `json:"retryable_reasons"`
	TripFailures      *int     `json:"trip_failures"`
	TripUnknowns      *int     `json:"trip_unknowns"`
	TripWindowSeconds *int64   `json:"trip_window_seconds"`
	ProbeBaseMs       *int64   `json:"probe_base_ms"`
	ProbeMaxMs        *int64   `json:"probe_max_ms"`
	BackoffFactor     *float64 `json:"backoff_factor"`
}

func policyFromJSON(raw []byte) (PolicyOverride, error) {
	var j policyJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return PolicyOverride{}, fmt.Errorf("decode a policy from the control history: %w", err)
	}
	dur := func(v *int64, unit time.Duration) *time.Duration {
		if v == nil {
			return nil
		}
		d := time.Duration(*v) * unit
		return &d
	}
	o := PolicyOverride{
		AttemptCap:    j.AttemptCap,
		BackoffBase:   dur(j.BackoffBaseMs, time.Millisecond),
		BackoffMax:    dur(j.BackoffMaxMs, time.Millisecond),
		RatePerMinute: j.RatePerMinute,
		RateBurst:     j.RateBurst,
		TextWindow:    dur(j.TextWindowSeconds, time.Second),
		BackoffFactor: j.BackoffFactor,
		TripFailures:  j.TripFailures,
		TripUnknowns:  j.TripUnknowns,
		TripWindow:    dur(j.TripWindowSeconds, time.Second),
		ProbeBase:     dur(j.ProbeBaseMs, time.Millisecond),
		ProbeMax:      dur(j.ProbeMaxMs, time.Millisecond),
	}
	if j.RetryableReasons != nil {
		o.RetryableReasons = toReasons(j.RetryableReasons)
	}
	return o, nil
}

func toReasons(names []string) []Reason {
	out := make([]Reason, len(names))
	for i, s := range names {
		out[i] = Reason(s)
	}
	return out
}

func policyRow(r dbsqlc.Policy) PolicyRow {
	i := func(v pgtype.Int4) *int {
		if !v.Valid {
			return nil
		}
		n := int(v.Int32)
		return &n
	}
	d := func(v pgtype.Int8, unit time.Duration) *time.Duration {
		if !v.Valid {
			return nil
		}
		x := time.Duration(v.Int64) * unit
		return &x
	}
	row := PolicyRow{Scope: r.Scope, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt, PolicyOverride: PolicyOverride{
		AttemptCap:    i(r.AttemptCap),
		BackoffBase:   d(r.BackoffBaseMs, time.Millisecond),
		BackoffMax:    d(r.BackoffMaxMs, time.Millisecond),
		RatePerMinute: i(r.RatePerMinute),
		RateBurst:     i(r.RateBurst),
		TextWindow:    d(r.TextWindowSeconds, time.Second),
		TripFailures:  i(r.TripFailures),
		TripUnknowns:  i(r.TripUnknowns),
		TripWindow:    d(r.TripWindowSeconds, time.Second),
		ProbeBase:     d(r.ProbeBaseMs, time.Millisecond),
		ProbeMax:      d(r.ProbeMaxMs, time.Millisecond),
	}}
	if r.BackoffFactor.Valid {
		f := r.BackoffFactor.Float64
		row.BackoffFactor = &f
	}
	if r.RetryableReasons != nil {
		row.RetryableReasons = toReasons(r.RetryableReasons)
	}
	return row
}

// Policies lists every policy row: the default first, then each account's overrides in account
// order.
func (l *Ledger) Policies(ctx context.Context) ([]PolicyRow, error) {
	var rows []dbsqlc.Policy
	err := l.inTx(ctx, "policy", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.PoliciesList(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list policies: %w", err)
	}
	out := make([]PolicyRow, len(rows))
	for i, r := range rows {
		out[i] = policyRow(r)
	}
	return out, nil
}

// PolicyLayers is the policy of one scope as its rows make it: the default row, the account's
// own row (nil when it has none, and always for GlobalScope), and the policy in force.
type PolicyLayers struct {
	Default   PolicyRow
	Override  *PolicyRow
	Effective Policy
}

// PolicyLayersFor reads the default policy row and the account's own row in one statement, so
// the three layers it returns agree with each other. account is GlobalScope or a configured
// account (else ErrUnknownAccount, as SetPolicy refuses it: the default policy is not the
// answer for an account that does not exist).
func (l *Ledger) PolicyLayersFor(ctx context.Context, account string) (PolicyLayers, error) {
	var rows []dbsqlc.Policy
	known := false
	err := l.inTx(ctx, "policy", func(q *dbsqlc.Queries) (err error) {
		if known, err = q.PolicyScopeKnown(ctx, account); err != nil || !known {
			return err
		}
		rows, err = q.PolicyLayersFor(ctx, account)
		return err
	})
	if err != nil {
		return PolicyLayers{}, fmt.Errorf("policy rows for %q: %w", account, err)
	}
	if !known {
		return PolicyLayers{}, fmt.Errorf("policy of %q: %w", account, ErrUnknownAccount)
	}
	var out PolicyLayers
	found := false
	for _, r := range rows {
		row := policyRow(r)
		if r.Scope == GlobalScope {
			out.Default, found = row, true
		} else {
			out.Override = &row
		}
	}
	if !found {
		return PolicyLayers{}, errors.New("policy: the default policy row is missing (run atmost migrate)")
	}
	out.Effective = out.Default.Over(Policy{}) // the default row sets every field
	if out.Override != nil {
		out.Effective = out.Override.Over(out.Effective)
	}
	return out, nil
}

// ControlChange is one row of the control history: an operator's change to a kill switch
// (Kind "switch"), a policy row ("policy"), the restore epoch ("epoch"), an account
// ("account": added, updated, disabled, enabled, rotated, revoked), or an operator's replay of
// a stored reject (ReplayKind), a console operator added or revoked (OperatorKind), or a producer
// of the HTTP API added or revoked (ProducerKind). Scope is
// the account id, or GlobalScope for the global switch, the default policy and the epoch; for
// a replay, the reject's id; for an operator or a producer, its name. Before is JSON null when the
// change created the control; Before and After hold the control's settings as the ledger's
// columns name them, and for a replay the reject as stored (reason, detail, stream,
// stream_seq) and what the replay did (outcome, account, delivery_key, and the reason and
// detail of a refusal).
type ControlChange struct {
	ID     string          `json:"id"`
	Kind   string          `json:"kind"`
	Scope  string          `json:"scope"`
	Actor  string          `json:"actor"`
	Reason string          `json:"reason"`
	Before json.RawMessage `json:"before"`
	After  json.RawMessage `json:"after"`
	At     time.Time       `json:"at"`
}

// ControlKinds are the kinds of ControlChange.
func ControlKinds() []string { return slices.Clone(controlKinds) }

var controlKinds = []string{"switch", "policy", "epoch", "account", ReplayKind, OperatorKind, ProducerKind, HealthKind}

// HealthKind is the kind of the control_history rows an account's health writes: its trips,
// probes, heals and an operator's resume.
const HealthKind = "health"

// ControlHistory returns up to max changes to controls, newest first: of kind, or of every kind
// when kind is empty.
func (l *Ledger) ControlHistory(ctx context.Context, kind string, max int) ([]ControlChange, error) {
	if kind != "" && !slices.Contains(controlKinds, kind) {
		return nil, fmt.Errorf("control history: %q is not a kind of control (%s)", kind, strings.Join(controlKinds, ", "))
	}
	if max < 1 || max > math.MaxInt32 {
		return nil, fmt.Errorf("control history: %d rows: ask for at least one", max)
	}
	var rows []dbsqlc.ControlHistoryListRow
	err := l.inTx(ctx, "control history", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.ControlHistoryList(ctx, dbsqlc.ControlHistoryListParams{Kind: kind, MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("control history: %w", err)
	}
	out := make([]ControlChange, len(rows))
	for i, r := range rows {
		before := json.RawMessage("null")
		if r.Before != nil {
			before = r.Before
		}
		out[i] = ControlChange{r.ControlID, r.Kind, r.Scope, r.Actor, r.Reason, before, r.After, r.At}
	}
	return out, nil
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
