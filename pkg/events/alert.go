package events

import (
	"time"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/identity"
)

// AlertVersion is the version of the alert payload this package writes.
const AlertVersion = 1

// The kinds of alert: an account's health tripped (held) or it serves again (healed), and an
// intent parked (a person decides).
const (
	AlertHeld   = "held"
	AlertHealed = "healed"
	AlertParked = "parked"
)

// AlertSubjects is the filter of every alert.
const AlertSubjects = "atmost.alert.>"

// AlertSubject is where an alert of kind about account is published:
// atmost.alert.<kind>.<account-token>.
func AlertSubject(kind, account string) string {
	return "atmost.alert." + kind + "." + identity.AccountToken(account)
}

// Alert is one notification (schema alert.schema.json beside this file), published on
// AlertSubject by the sweeper and, signed, to the deployment's ATMOST_ALERT_URL. ID is stable
// per fact (alert:health:<control id>, alert:parked:<delivery key>:<seq>) and is the message's
// Nats-Msg-Id: the same fact told twice (two sweepers, a restart) is deduplicated on it.
type Alert struct {
	V       int       `json:"v"`
	ID      string    `json:"id"`
	Kind    string    `json:"kind"`
	Account string    `json:"account"`
	At      time.Time `json:"at"`
	// For held and healed: the health state now and before, its cause (held), who changed it
	// (a role, or the operator who resumed it) and why, and when a probe may next go ("" none).
	State     string `json:"state,omitempty"`
	From      string `json:"from,omitempty"`
	Cause     string `json:"cause,omitempty"`
	Actor     string `json:"actor,omitempty"`
	Why       string `json:"why,omitempty"`
	NextProbe string `json:"next_probe,omitempty"`
	// For parked: the intent and the reason it parked for (docs/operators.md#parked-reasons).
	DeliveryKey *identity.DeliveryKey `json:"delivery_key,omitempty"`
	Reason      atmosttype.Reason     `json:"reason,omitempty"`
}

// Subject is where a is published.
func (a Alert) Subject() string { return AlertSubject(a.Kind, a.Account) }
