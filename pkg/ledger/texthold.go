package ledger

import (
	"encoding/json"
	"time"

	"github.com/atmost/atmost/pkg/identity"
)

// TextHold is what Authorize records in the history detail of a duplicate_text refusal: which
// intent the account's text is kept for, and when the window ends
// (docs/design.md#the-duplicate-text-window).
type TextHold struct {
	// Holder is the intent that holds the account's claim on the text, or that was stored
	// before the refused one and still waits to be sent.
	Holder identity.DeliveryKey
	// WindowEndsAt is when the text is free again, by the database's clock, as it stood at the
	// refusal: a holder authorized again later moves it on. Nil while the holder waits for the
	// authorization that begins its window, which then lasts Window.
	WindowEndsAt *time.Time
	// Window is the account's duplicate-text window at the refusal.
	Window time.Duration
}

// textHoldDetail is the detail's JSON, as IntentsAuthorize writes it.
type textHoldDetail struct {
	Holder        string     `json:"holder"`
	WindowEndsAt  *time.Time `json:"window_ends_at"`
	WindowSeconds int64      `json:"window_seconds"`
}

// TextHold reads the detail of a duplicate_text transition; false for any other transition and
// for one recorded before the ledger wrote the holder (its detail is {}).
func (t Transition) TextHold() (TextHold, bool) {
	if t.Reason != ReasonDuplicateText {
		return TextHold{}, false
	}
	var d textHoldDetail
	if err := json.Unmarshal(t.Detail, &d); err != nil || d.Holder == "" {
		return TextHold{}, false
	}
	holder, err := identity.ParseDeliveryKey(d.Holder)
	if err != nil {
		return TextHold{}, false
	}
	return TextHold{Holder: holder, WindowEndsAt: d.WindowEndsAt, Window: time.Duration(d.WindowSeconds) * time.Second}, true
}

// TextHold is the hold that parked the intent, when it is parked duplicate_text: read from its
// latest transition.
func (r Record) TextHold() (TextHold, bool) {
	if r.Intent.State != Parked || r.Intent.Reason != ReasonDuplicateText || len(r.Transitions) == 0 {
		return TextHold{}, false
	}
	return r.Transitions[len(r.Transitions)-1].TextHold()
}
