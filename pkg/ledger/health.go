package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// This file is account health (docs/design.md#account-health): whether an account's platform can
// take sends now. It lives in the database so that every dispatcher of a pool agrees, and only
// guarded statements change it (queries/health.sql, and the probe's slot in Begin and
// Authorize), each change a control_history row of kind health.

// HealthState is an account's health.
type HealthState string

// The three health states.
const (
	// Serving: sends go ahead. An account whose health never changed is serving.
	Serving HealthState = "serving"
	// Holding: the platform cannot take anything now. Begin opens no attempt and Authorize
	// lets none through; the account's intents wait pending and spend no attempt.
	Holding HealthState = "holding"
	// Probing: one intent, the probe, is let through to learn whether the platform is back;
	// the others wait as while holding.
	Probing HealthState = "probing"
)

// Causes of a hold. The cause decides how the hold ends.
const (
	// CausePlatformUnavailable: consecutive definitive failures that say the platform cannot
	// take anything now (no connection, 429, 503). Probed after a backoff; a probe's success
	// ends the hold.
	CausePlatformUnavailable = "platform_unavailable"
	// CauseAuthFailed: the platform refused the credential (401 or 403 as the adapter declares).
	// Never probed: waiting will not fix a credential; `atmost accounts resume` ends the hold,
	// after a rotation.
	CauseAuthFailed = "auth_failed"
	// CauseUnknownOutcomes: more unknown outcomes than the policy's trip_unknowns within its
	// window: each further send risks another. Never probed; the hold ends when the lookups
	// (or an operator) bring the account's indeterminate intents down to trip_unknowns, or by
	// `atmost accounts resume`.
	CauseUnknownOutcomes = "unknown_outcomes"
)

// SignalOf is the signal of an outcome: its Signal when the adapter set one, otherwise derived
// from its result, reason and status (the outcome's detail "status" of a definitive refusal:
// atmosttype's DefaultAuthStatuses and DefaultUnavailableStatuses).
func SignalOf(o Outcome) Signal {
	if o.Signal != "" {
		return o.Signal
	}
	switch o.Result {
	case Sent:
		if o.ObjectID == "" || (!o.Confirmed && o.Reason != ReasonPublishedUnread) {
			return SignalUnknown
		}
		return SignalOK
	case NotSent:
		if o.Reason == ReasonConnectionFailed {
			return SignalUnavailable
		}
		status := statusOf(o.Detail)
		for _, s := range atmosttype.DefaultAuthStatuses() {
			if status == s {
				return SignalAuth
			}
		}
		for _, s := range atmosttype.DefaultUnavailableStatuses() {
			if status == s {
				return SignalUnavailable
			}
		}
		return SignalOK
	}
	return SignalUnknown
}

func statusOf(detail map[string]any) int {
	switch v := detail["status"].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	}
	return 0
}

// Health is an account's health as the ledger holds it.
type Health struct {
	Account string
	State   HealthState
	// Cause says why it holds or probes ("" while serving).
	Cause string
	// Since is when the state began (zero for an account whose health never changed).
	Since time.Time
	// NextProbe is when a probe may next be let through; zero when none will be (serving, or a
	// hold only an operator or reconciled unknowns end).
	NextProbe time.Time
	// Failures counts the consecutive definitive failures reported while serving; Trips the
	// probes that failed in a row.
	Failures int
	Trips    int
}

// AccountHealth returns the health of accounts (all when none is named), in account order.
func (l *Ledger) AccountHealth(ctx context.Context, accounts ...string) ([]Health, error) {
	var rows []dbsqlc.AccountHealthListRow
	err := l.readOne(ctx, "account health", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.AccountHealthList(ctx, append([]string{}, accounts...))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("account health: %w", err)
	}
	out := make([]Health, 0, len(rows))
	for _, r := range rows {
		h := Health{Account: r.AccountID, State: HealthState(r.State), Cause: r.Cause, Failures: int(r.Failures), Trips: int(r.Trips)}
		if r.Since != nil {
			h.Since = *r.Since
		}
		if r.NextProbeAt != nil && h.State != Serving {
			h.NextProbe = *r.NextProbeAt
		}
		out = append(out, h)
	}
	return out, nil
}

// HealthChange is one change of an account's health.
type HealthChange struct {
	Account string
	From    HealthState
	To      HealthState
	Cause   string
	// NextProbe is when the next probe may go (zero: none).
	NextProbe time.Time
}

// ErrNotHolding: `accounts resume` was asked of an account that serves.
var ErrNotHolding = errors.New("ledger: the account is serving: nothing to resume")

// ResumeAccount is an operator's word that a holding or probing account serves again (after a
// credential's rotation, once its unknowns are looked into, or a platform known to be back).
// Written to control_history with the actor and reason. ErrUnknownAccount for an account that is
// not configured, ErrNotHolding for one that serves.
func (l *Ledger) ResumeAccount(ctx context.Context, account string, by Actor) (HealthChange, error) {
	actor, reason := by.Name, by.Reason
	if strings.TrimSpace(actor) == "" {
		return HealthChange{}, errors.New("resume: an operator must be named")
	}
	if err := checkChange(actor, "reason", reason); err != nil {
		return HealthChange{}, fmt.Errorf("resume %q: %w", account, err)
	}
	var row dbsqlc.AccountHealthResumeRow
	err := l.inTx(ctx, "resume account", func(q *dbsqlc.Queries) (err error) {
		row, err = q.AccountHealthResume(ctx, dbsqlc.AccountHealthResumeParams{AccountID: account, Actor: actor, Reason: reason})
		return err
	})
	if err != nil {
		return HealthChange{}, fmt.Errorf("resume %q: %w", account, err)
	}
	switch row.Outcome {
	case "unknown_account":
		return HealthChange{}, fmt.Errorf("resume %q: %w", account, ErrUnknownAccount)
	case "serving":
		return HealthChange{}, fmt.Errorf("resume %q: %w", account, ErrNotHolding)
	}
	return HealthChange{Account: account, From: HealthState(row.PriorState), To: Serving, Cause: row.PriorCause}, nil
}

// HealReconciled serves again every account held for unknown outcomes whose indeterminate
// intents are down to its policy's trip_unknowns: the sweeper's pass. It returns the accounts
// it healed.
func (l *Ledger) HealReconciled(ctx context.Context) ([]string, error) {
	var out []string
	err := l.inTx(ctx, "heal reconciled", func(q *dbsqlc.Queries) (err error) {
		out, err = q.AccountHealthHeal(ctx, l.cfg.Actor)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("heal reconciled accounts: %w", err)
	}
	return out, nil
}

// healthReport is one completion's signal, for reportHealth.
type healthReport struct {
	account string
	token   []byte
	signal  Signal
}

// reportHealth feeds completions to their accounts' health, after the transaction that
// recorded them: trips, a probe's verdict, or the count of consecutive failures.
func (l *Ledger) reportHealth(ctx context.Context, reports []healthReport) ([]HealthChange, error) {
	if len(reports) == 0 {
		return nil, nil
	}
	p := dbsqlc.AccountHealthReportParams{Actor: l.cfg.Actor}
	seen := map[string]bool{}
	var accounts []string
	for _, r := range reports {
		p.AccountIds = append(p.AccountIds, r.account)
		p.AttemptTokens = append(p.AttemptTokens, r.token)
		p.Signals = append(p.Signals, string(r.signal))
		if !seen[r.account] {
			seen[r.account] = true
			accounts = append(accounts, r.account)
		}
	}
	var rows []dbsqlc.AccountHealthReportRow
	err := l.inTx(ctx, "account health", func(q *dbsqlc.Queries) (err error) {
		if err := q.AccountHealthEnsure(ctx, accounts); err != nil {
			return err
		}
		rows, err = q.AccountHealthReport(ctx, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []HealthChange
	for _, r := range rows {
		if !r.NewState.Valid || r.Change == "count" {
			continue
		}
		c := HealthChange{Account: r.AccountID, From: HealthState(r.PriorState), To: HealthState(r.NewState.String), Cause: r.Cause.String}
		if r.NextProbeAt != nil {
			c.NextProbe = *r.NextProbeAt
		}
		out = append(out, c)
	}
	return out, nil
}

// HealthRecord is one change of an account's health as control_history holds it.
type HealthRecord struct {
	ID      string // the control_history row's id
	Account string
	From    HealthState
	To      HealthState
	Cause   string // the cause after the change ("" when it serves)
	Actor   string // the role or the operator
	Reason  string // the operator's reason, or the cause
	// NextProbe is when the next probe may go, as the change set it ("" when none).
	NextProbe string
	At        time.Time
}

// HealthChangesSince returns the changes of accounts' health recorded after since, oldest
// first, at most max: what alerts tell.
func (l *Ledger) HealthChangesSince(ctx context.Context, since time.Time, max int) ([]HealthRecord, error) {
	var rows []dbsqlc.HealthChangesSinceRow
	err := l.scan(ctx, "health changes", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.HealthChangesSince(ctx, dbsqlc.HealthChangesSinceParams{Since: since, MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]HealthRecord, len(rows))
	for i, r := range rows {
		out[i] = HealthRecord{ID: r.ControlID, Account: r.AccountID, From: HealthState(r.BeforeState), To: HealthState(r.AfterState),
			Cause: r.AfterCause, Actor: r.Actor, Reason: r.Reason, NextProbe: r.NextProbeAt, At: r.At}
	}
	return out, nil
}

// ParkedRecord is one intent parked, for alerts.
type ParkedRecord struct {
	Key     identity.DeliveryKey
	Account string
	Reason  Reason
	Seq     int64
	At      time.Time
}

// ParkedSince returns the intents parked after since, oldest first, at most max.
func (l *Ledger) ParkedSince(ctx context.Context, since time.Time, max int) ([]ParkedRecord, error) {
	var rows []dbsqlc.ParkedSinceRow
	err := l.scan(ctx, "parked since", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.ParkedSince(ctx, dbsqlc.ParkedSinceParams{Since: since, MaxRows: int32(max)})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]ParkedRecord, 0, len(rows))
	for _, r := range rows {
		key, err := identity.DeliveryKeyFromBytes(r.DeliveryKey)
		if err != nil {
			return nil, fmt.Errorf("parked since: %w", err)
		}
		out = append(out, ParkedRecord{Key: key, Account: r.AccountID, Reason: Reason(r.Reason), Seq: r.TransitionSeq, At: r.UpdatedAt})
	}
	return out, nil
}
