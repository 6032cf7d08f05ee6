package ledger

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNote is the most characters a person's note may hold: the reason of a control change,
// the note of a park or a retry, the evidence of a resolve. A note is read by people on every
// page that lists the change; one of a million characters made the console's overview 2 MB.
const MaxNote = 1000

// MaxActor is the most characters an actor's name may hold.
const MaxActor = 200

// ErrInvalidNote: a note or an actor is longer than its limit, is not valid UTF-8, or holds a
// NUL or another control character but a line break or a tab. PostgreSQL refuses a NUL in text
// with a raw SQLSTATE; the ledger refuses it, and the rest, by name before any statement runs.
var ErrInvalidNote = errors.New("ledger: invalid note")

// CheckNote refuses a note (what, e.g. "reason") the ledger will not store: see ErrInvalidNote.
// The ledger's operations call it on every note and actor they are given, so that every caller,
// the console, the CLI or another program, is held by the same rule.
func CheckNote(what, note string) error {
	return checkText(what, note, MaxNote)
}

func checkText(what, s string, max int) error {
	switch {
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: the %s is not valid UTF-8", ErrInvalidNote, what)
	case utf8.RuneCountInString(s) > max:
		return fmt.Errorf("%w: the %s holds %d characters, more than %d", ErrInvalidNote, what, utf8.RuneCountInString(s), max)
	case strings.IndexFunc(s, func(r rune) bool { return r < 0x20 && r != '\n' && r != '\r' && r != '\t' || r == 0x7f }) >= 0:
		return fmt.Errorf("%w: the %s holds a NUL or another control character", ErrInvalidNote, what)
	}
	return nil
}

// checkChange checks the actor and the note of an operator's change.
func checkChange(actor, what, note string) error {
	if err := checkText("operator's name", actor, MaxActor); err != nil {
		return err
	}
	return CheckNote(what, note)
}
