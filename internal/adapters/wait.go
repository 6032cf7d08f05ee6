package adapters

import (
	"context"
	"fmt"
	"time"

	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// CauseAdapterUnavailable is the cause of a Wait whose account's adapter does not open: an
// unknown platform or settings the adapter refuses (a row written before accounts were
// checked at the door, or a platform this build does not have).
const CauseAdapterUnavailable = "adapter_unavailable"

// Wait is why the pending intents of an account wait, no attempt opened: a gate of the ledger
// that holds the whole account (Hold), or an adapter that does not open (Adapter). Cause names
// it for metrics and JSON: the hold's reason (kill_switch, account_disabled,
// credential_revoked) or CauseAdapterUnavailable.
type Wait struct {
	Account string
	Cause   string
	Hold    *ledger.Hold
	Adapter error
}

// Holder is the ledger read Waits needs; *ledger.Ledger is one.
type Holder interface {
	Holds(ctx context.Context, accounts []string) (map[string]ledger.Hold, error)
}

// Waits says, for each of accounts, why its intents wait now; an account nothing holds is
// absent. A gate of the ledger comes first, as the dispatcher checks it first; an account no
// gate holds is checked by opening its adapter from r (CheckAccount, sending nothing), whose
// credential reference is read through lookupEnv: one that cannot be read there is not a cause,
// since the roles read it in their own environment.
func Waits(ctx context.Context, l Holder, r platform.Registry, lookupEnv func(string) (string, bool), accounts []ledger.Account) (map[string]Wait, error) {
	out := map[string]Wait{}
	if len(accounts) == 0 {
		return out, nil
	}
	ids := make([]string, len(accounts))
	for i, a := range accounts {
		ids[i] = a.ID
	}
	holds, err := l.Holds(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, a := range accounts {
		if h, ok := holds[a.ID]; ok {
			out[a.ID] = Wait{Account: a.ID, Cause: string(h.Reason), Hold: &h}
			continue
		}
		if _, err := CheckAccount(r, a, lookupEnv); err != nil {
			out[a.ID] = Wait{Account: a.ID, Cause: CauseAdapterUnavailable, Adapter: err}
		}
	}
	return out, nil
}

// Accounts is the ledger read IntentWait needs; *ledger.Ledger is one.
type Accounts interface {
	Holder
	Account(ctx context.Context, id string) (ledger.Account, error)
}

// IntentWait says why in waits with no attempt opened, because its account cannot be served
// (Waits), or nil: nil too for an intent that is not pending, since only a pending intent waits
// for its account. atmost intents show and the console's intent page both say it from here.
func IntentWait(ctx context.Context, l Accounts, r platform.Registry, lookupEnv func(string) (string, bool), in ledger.Intent) (*Wait, error) {
	if in.State != ledger.Pending {
		return nil, nil
	}
	a, err := l.Account(ctx, in.Account)
	if err != nil {
		return nil, err
	}
	waits, err := Waits(ctx, l, r, lookupEnv, []ledger.Account{a})
	if err != nil {
		return nil, err
	}
	if w, ok := waits[a.ID]; ok {
		return &w, nil
	}
	return nil, nil
}

// String says in one line why the account's intents wait, as an operator reads it: "account
// acct-b is disabled since 2025-01-02T03:04:05Z, by alice, reason: moving it".
func (w Wait) String() string {
	if w.Adapter != nil {
		return fmt.Sprintf("account %s cannot be served: its platform adapter does not open: %v (fix it with atmost accounts update)", w.Account, w.Adapter)
	}
	h := w.Hold
	var what string
	switch {
	case h == nil:
		return fmt.Sprintf("account %s: %s", w.Account, w.Cause)
	case h.Reason == ledger.ReasonKillSwitch && h.Scope == ledger.GlobalScope:
		what = "the global kill switch is on"
	case h.Reason == ledger.ReasonKillSwitch:
		what = fmt.Sprintf("account %s's kill switch is on", w.Account)
	case h.Reason == ledger.ReasonAccountDisabled:
		what = fmt.Sprintf("account %s is disabled", w.Account)
	case h.Reason == ledger.ReasonCredentialRevoked:
		what = fmt.Sprintf("account %s's credential is revoked", w.Account)
	case h.Reason == ledger.ReasonHeld:
		next := "no probe: atmost accounts resume " + w.Account + " ends it"
		if h.NextProbe != nil {
			next = "next probe " + h.NextProbe.UTC().Format(time.RFC3339)
		}
		since := ""
		if h.Since != nil {
			since = " since " + h.Since.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("account %s is %s (%s)%s, %s", w.Account, h.Health, h.Why, since, next)
	default:
		what = fmt.Sprintf("account %s is held (%s)", w.Account, h.Reason)
	}
	if h.Since == nil {
		return what + " (no record of who did it)"
	}
	return fmt.Sprintf("%s since %s, by %s, reason: %s", what, h.Since.UTC().Format(time.RFC3339), h.By, dashed(h.Why))
}

func dashed(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
