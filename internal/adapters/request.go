package adapters

import (
	"encoding/json"
	"fmt"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// RequestOf is the platform's view of an intent: what an adapter prepares, reads back and
// looks up. A reply's Reply names its parent; its ObjectID is left "" (ReplyOf sets it).
func RequestOf(in ledger.Intent) (platform.Request, error) {
	r := platform.Request{Key: in.Key, Account: in.Account, Action: in.Action, Target: in.Target, Request: json.RawMessage(in.Request)}
	if !in.ReplyTo.IsZero() {
		// The parent's object is the dispatcher's to set, once it read the parent published.
		r.Reply = &platform.Reply{Parent: in.ReplyTo}
	}
	var fields struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal([]byte(in.Request), &fields); err != nil {
		return r, fmt.Errorf("intent %s: request: %w", in.Key, err)
	}
	if fields.Text != nil {
		r.Text = identity.NormalizeText(*fields.Text)
	}
	return r, nil
}

// ReplyOf is RequestOf for an intent whose parent is known: a reply's Reply also names the object
// its parent created (parentObject, "" for an intent that is not a reply).
func ReplyOf(in ledger.Intent, parentObject string) (platform.Request, error) {
	r, err := RequestOf(in)
	if r.Reply != nil {
		r.Reply.ObjectID = parentObject
	}
	return r, err
}
