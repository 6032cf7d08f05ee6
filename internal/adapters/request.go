package adapters

import (
	"encoding/json"
	"fmt"

	"github.com/atmost/atmost/pkg/identity"
	"github.com/atmost/atmost/pkg/ledger"
	"github.com/atmost/atmost/pkg/platform"
)

// RequestOf is the platform's view of an intent: what an adapter prepares, reads back and
// looks up.
func RequestOf(in ledger.Intent) (platform.Request, error) {
	r := platform.Request{Key: in.Key, Account: in.Account, Action: in.Action, Target: in.Target, Request: json.RawMessage(in.Request)}
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
