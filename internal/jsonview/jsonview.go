// Package jsonview is how atmost shows the ledger's records as JSON: the intents, accounts and
// health the atmost command prints with --json and the console's API (/api/v1) answers with,
// in one shape, with snake_case keys where the ledger's types have none.
package jsonview

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
)

// Intent is an intent as the intents commands print it. Request is the canonical request
// projection the intent sends; Attempt, Epoch and Generation name its latest attempt.
type Intent struct {
	Key                string          `json:"key"`
	Account            string          `json:"account"`
	Action             string          `json:"action"`
	Target             string          `json:"target"`
	Request            json.RawMessage `json:"request,omitempty"`
	Occurrence         string          `json:"occurrence,omitempty"`
	State              ledger.State    `json:"state"`
	Reason             ledger.Reason   `json:"reason"`
	Seq                int64           `json:"seq"`
	AttemptsAuthorized int             `json:"attempts_authorized"`
	Attempt            *string         `json:"attempt"`
	Epoch              int64           `json:"epoch,omitempty"`
	Generation         int64           `json:"generation,omitempty"`
	LeaseExpiresAt     *time.Time      `json:"lease_expires_at"`
	ObjectID           string          `json:"object_id"`
	CreatedAt          time.Time       `json:"created_at"`
	UpdatedAt          time.Time       `json:"updated_at"`
	// ReplyTo is the parent's delivery key of a reply; NotBefore and ExpiresAt the envelope's
	// times as first stored.
	ReplyTo   string     `json:"reply_to,omitempty"`
	NotBefore *time.Time `json:"not_before,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

func IntentOf(in ledger.Intent, withRequest bool) Intent {
	j := Intent{
		Key: in.Key.String(), Account: in.Account, Action: in.Action, Target: in.Target, Occurrence: in.Occurrence,
		State: in.State, Reason: in.Reason, Seq: in.Seq, AttemptsAuthorized: in.AttemptsAuthorized, Epoch: in.Epoch,
		Generation: in.Generation, LeaseExpiresAt: in.LeaseExpiresAt, ObjectID: in.ObjectID, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt,
		NotBefore: in.NotBefore, ExpiresAt: in.ExpiresAt,
	}
	if !in.ReplyTo.IsZero() {
		j.ReplyTo = in.ReplyTo.String()
	}
	if in.Token != (identity.AttemptToken{}) {
		token := in.Token.String()
		j.Attempt = &token
	}
	if withRequest {
		j.Request = Raw([]byte(in.Request))
	}
	return j
}

// Raw is b when it is JSON, else b as a JSON string, and {} when b is empty.
func Raw(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("{}")
	}
	if json.Valid(b) {
		return json.RawMessage(compact(b))
	}
	s, _ := json.Marshal(string(b))
	return s
}

// Record is intents show's JSON document.
type Record struct {
	Intent          Intent           `json:"intent"`
	Attempts        []Attempt        `json:"attempts"`
	Evidence        []Evidence       `json:"evidence"`
	History         []Transition     `json:"history"`
	Reconciliations []Reconciliation `json:"reconciliations"`
	// Waiting is set for a pending intent whose account cannot be served.
	Waiting *Wait `json:"waiting,omitempty"`
}

// Wait is why an intent waits: Cause as atmost_account_waiting_intents names it, Why as
// an operator reads it.
type Wait struct {
	Cause string `json:"cause"`
	Why   string `json:"why"`
}

type Attempt struct {
	Attempt           string    `json:"attempt"`
	Epoch             int64     `json:"epoch"`
	Generation        int64     `json:"generation"`
	CredentialVersion int64     `json:"credential_version"`
	RequestHash       string    `json:"request_hash"`
	CreatedAt         time.Time `json:"created_at"`
}

type Evidence struct {
	Attempt    string          `json:"attempt"`
	Epoch      int64           `json:"epoch"`
	Generation int64           `json:"generation"`
	Result     string          `json:"result"`
	Reason     ledger.Reason   `json:"reason"`
	ObjectID   string          `json:"object_id"`
	Fenced     bool            `json:"fenced"`
	Detail     json.RawMessage `json:"detail"`
	RecordedAt time.Time       `json:"recorded_at"`
}

type Transition struct {
	Seq        int64           `json:"seq"`
	From       ledger.State    `json:"from"`
	To         ledger.State    `json:"to"`
	Reason     ledger.Reason   `json:"reason"`
	Attempt    *string         `json:"attempt"`
	Epoch      int64           `json:"epoch,omitempty"`
	Generation int64           `json:"generation,omitempty"`
	Actor      string          `json:"actor"`
	Detail     json.RawMessage `json:"detail"`
	At         time.Time       `json:"at"`
}

type Reconciliation struct {
	Attempt  string          `json:"attempt"`
	Step     string          `json:"step"`
	Result   string          `json:"result"`
	ObjectID string          `json:"object_id"`
	Actor    string          `json:"actor"`
	Detail   json.RawMessage `json:"detail"`
	At       time.Time       `json:"at"`
}

func RecordOf(rec ledger.Record) Record {
	out := Record{
		Intent:          IntentOf(rec.Intent, true),
		Attempts:        make([]Attempt, len(rec.Attempts)),
		Evidence:        make([]Evidence, len(rec.Evidence)),
		History:         make([]Transition, len(rec.Transitions)),
		Reconciliations: make([]Reconciliation, len(rec.Reconciliations)),
	}
	for i, a := range rec.Attempts {
		out.Attempts[i] = Attempt{a.Token.String(), a.Epoch, a.Generation, a.CredentialVersion, hex.EncodeToString(a.RequestHash), a.CreatedAt}
	}
	for i, e := range rec.Evidence {
		out.Evidence[i] = Evidence{e.Token.String(), e.Epoch, e.Generation, e.Result, e.Reason, e.ObjectID, e.Fenced, Raw(e.Detail), e.RecordedAt}
	}
	for i, t := range rec.Transitions {
		j := Transition{Seq: t.Seq, From: t.From, To: t.To, Reason: t.Reason, Epoch: t.Epoch, Generation: t.Generation,
			Actor: t.Actor, Detail: Raw(t.Detail), At: t.At}
		if t.Token != nil {
			token := t.Token.String()
			j.Attempt = &token
		}
		out.History[i] = j
	}
	for i, r := range rec.Reconciliations {
		out.Reconciliations[i] = Reconciliation{r.Token.String(), r.Step, r.Result, r.ObjectID, r.Actor, Raw(r.Detail), r.At}
	}
	return out
}

// Account is an account as the accounts commands print it with --json: snake_case keys, as
// every command's JSON, where ledger.Account (whose fields have no JSON names) would print
// PascalCase. Account is the account's id, named as in every other JSON of atmost; Settings
// are the adapter's settings as stored.
type Account struct {
	Account           string          `json:"account"`
	Platform          string          `json:"platform"`
	Settings          json.RawMessage `json:"settings"`
	CredentialRef     string          `json:"credential_ref"`
	CredentialVersion int64           `json:"credential_version"`
	Revoked           bool            `json:"revoked"`
	Disabled          bool            `json:"disabled"`
	ContractVersion   string          `json:"contract_version"`
	CreatedAt         time.Time       `json:"created_at"`
	UpdatedAt         time.Time       `json:"updated_at"`
}

// AccountOf is a as accounts ls --json and accounts show --json print it (a test checks it
// carries every field of ledger.Account).
func AccountOf(a ledger.Account) Account {
	return Account{Account: a.ID, Platform: a.Platform, Settings: Raw(a.Settings), CredentialRef: a.CredentialRef,
		CredentialVersion: a.CredentialVersion, Revoked: a.Revoked, Disabled: a.Disabled, ContractVersion: a.ContractVersion, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
}

// Health is an account's health as accounts ls --json and accounts show --json print it:
// since and next_probe null when there is none.
type Health struct {
	State     string     `json:"state"`
	Cause     string     `json:"cause"`
	Since     *time.Time `json:"since"`
	NextProbe *time.Time `json:"next_probe"`
}

func HealthOf(h ledger.Health) Health {
	out := Health{State: string(h.State), Cause: h.Cause}
	if out.State == "" {
		out.State = string(ledger.Serving)
	}
	if !h.Since.IsZero() {
		out.Since = &h.Since
	}
	if !h.NextProbe.IsZero() {
		out.NextProbe = &h.NextProbe
	}
	return out
}

// Switch is a kill switch as the switch commands print it. Scope "" is the global switch;
// UpdatedAt is null for a switch never set.
type Switch struct {
	Scope     string     `json:"scope"`
	Engaged   bool       `json:"engaged"`
	Reason    string     `json:"reason"`
	Actor     string     `json:"actor"`
	UpdatedAt *time.Time `json:"updated_at"`
}

func SwitchOf(s ledger.Switch) Switch {
	at := s.UpdatedAt
	return Switch{s.Scope, s.Engaged, s.Reason, s.Actor, &at}
}

// Reject is a refused message as rejects ls prints it; Preview is the message's first
// bytes (ledger.RejectPreviewBytes) as text. Detail, Subject and Headers are ledger.StoredText,
// so that any bytes survive JSON.
type Reject struct {
	ID        string              `json:"id"`
	Reason    string              `json:"reason"`
	Detail    string              `json:"detail"`
	Subject   string              `json:"subject"`
	Stream    string              `json:"stream"`
	StreamSeq int64               `json:"stream_seq"`
	Headers   map[string][]string `json:"headers"`
	Preview   string              `json:"preview"`
	Size      int                 `json:"size"`
	Truncated bool                `json:"truncated"`
	SHA256    string              `json:"sha256,omitempty"`
	At        time.Time           `json:"at"`
}

// RejectOf is r as rejects ls --json prints it.
func RejectOf(r ledger.StoredRejection) Reject {
	headers := make(map[string][]string, len(r.Headers))
	for k, vs := range r.Headers {
		stored := make([]string, len(vs))
		for j, v := range vs {
			stored[j] = ledger.StoredText(v)
		}
		headers[ledger.StoredText(k)] = stored
	}
	return Reject{r.ID, r.Reason, ledger.StoredText(r.Detail), ledger.StoredText(r.Subject), r.Stream, r.StreamSeq, headers,
		string(r.Preview), r.Size, r.Truncated, hex.EncodeToString(r.SHA256), r.At}
}

// compact is raw without insignificant space; null when raw is empty.
func compact(raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return []byte("null")
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}
