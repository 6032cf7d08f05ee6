package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/atmost/atmost/pkg/ledger/internal/dbsqlc"
)

// This file holds the gates: what the ledger says an account allows now (its switches,
// credential, contract, policy and rate bucket), which the dispatcher reads before it opens an
// attempt and which Authorize checks again in its own statement.

// Gate is what the cheap transient gates say about one account before any attempt is opened.
// It is a read, not a decision: Authorize re-checks every gate in the statement that decides.
type Gate struct {
	Account Account
	// Stopped: a kill switch (the account's or the global one) is engaged.
	Stopped bool
	// RatePerMinute is the account's rate limit; 0 means unlimited.
	RatePerMinute int
	// Tokens is what the account's rate bucket holds now.
	Tokens float64
	// Health is the account's health state and HealthCause why it holds; ProbeDue says a probe
	// may be let through now (Begin gives the slot to one intent of the pool), NextProbe when
	// one may next (zero: none will until an operator resumes the account or its unknowns are
	// reconciled).
	Health      HealthState
	HealthCause string
	ProbeDue    bool
	NextProbe   time.Time
}

// Admits reports whether the n-th send (from 0) of a batch for this account finds a rate
// token now, and if not, how long until it will.
func (g Gate) Admits(n int) (bool, time.Duration) {
	if g.RatePerMinute == 0 || float64(n)+1 <= g.Tokens {
		return true, 0
	}
	missing := float64(n) + 1 - g.Tokens
	return false, time.Duration(missing * 60 / float64(g.RatePerMinute) * float64(time.Second)).Round(time.Millisecond)
}

// Refusal names the gate that refuses the whole account now ("" when none does), in the order
// Authorize checks them: kill_switch, account_disabled, credential_revoked or held (the account
// holds and no probe is due; Begin and Authorize hold it too). The rate limit is per send: see
// Admits.
func (g Gate) Refusal() Reason {
	switch {
	case g.Stopped:
		return ReasonKillSwitch
	case g.Account.Disabled:
		return ReasonAccountDisabled
	case g.Account.Revoked:
		return ReasonCredentialRevoked
	case g.Health != Serving && !g.ProbeDue:
		return ReasonHeld
	}
	return ""
}

// Gates reads the transient gates of accounts, by account id. An account that is not
// configured is absent from the map.
func (l *Ledger) Gates(ctx context.Context, accounts []string) (map[string]Gate, error) {
	var rows []dbsqlc.DispatchGatesRow
	err := l.readOne(ctx, "gates", func(q *dbsqlc.Queries) (err error) {
		rows, err = q.DispatchGates(ctx, dbsqlc.DispatchGatesParams{Now: l.clock(), AccountIds: accounts})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("gates of %d accounts: %w", len(accounts), err)
	}
	out := make(map[string]Gate, len(rows))
	for _, r := range rows {
		out[r.AccountID] = Gate{
			Account: Account{ID: r.AccountID, Platform: r.Platform, Settings: json.RawMessage(r.Settings), CredentialRef: r.CredentialRef,
				CredentialVersion: r.CredentialVersion, Revoked: r.Revoked, Disabled: r.Disabled, ContractVersion: r.ContractVersion},
			Stopped:       r.Stopped,
			RatePerMinute: int(r.RatePerMinute),
			Tokens:        r.Tokens,
			Health:        HealthState(r.HealthState),
			HealthCause:   r.HealthCause,
			ProbeDue:      r.ProbeDue,
		}
		next := r.NextProbeAt
		if HealthState(r.HealthState) == Probing {
			next = r.ProbeUntil
		}
		if next != nil && HealthState(r.HealthState) != Serving {
			g := out[r.AccountID]
			g.NextProbe = *next
			out[r.AccountID] = g
		}
	}
	return out, nil
}
