package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/user"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/atmost/atmost/pkg/ledger"
)

// account returns the --account flag's value, refusing one given but empty: a script whose
// account variable is empty must not change the global switch or the default policy.
func (c *line) account(value string) (string, int) {
	if c.given("account") && strings.TrimSpace(value) == "" {
		return "", c.usageError("--account is empty: name the account, or leave the flag out for the global scope")
	}
	return value, ExitOK
}

// change returns the operator and the reason of a change, or the exit code of a usage error
// when either is missing.
func (c *line) change() (operator, reason string, code int) {
	reason = strings.TrimSpace(c.reason)
	if reason == "" {
		return "", "", c.usageError("--reason is required: say why, for the control history")
	}
	if err := ledger.CheckNote("--reason", reason); err != nil {
		return "", "", c.usageError("%v", err)
	}
	operator, err := operatorName(c.io, c.operator)
	if err != nil {
		return "", "", c.usageError("%v", err)
	}
	return operator, reason, ExitOK
}

// operatorName is who makes a change: the --operator flag, else ATMOST_OPERATOR, else the OS
// user as user:NAME. None of them is an error: a change without an author is refused.
func operatorName(io IO, flagValue string) (string, error) {
	if name := strings.TrimSpace(flagValue); name != "" {
		return name, nil
	}
	if name := strings.TrimSpace(setting(io.Env, "ATMOST_OPERATOR", "")); name != "" {
		return name, nil
	}
	lookup := io.User
	if lookup == nil {
		lookup = func() (string, error) {
			u, err := user.Current()
			if err != nil {
				return "", err
			}
			return u.Username, nil
		}
	}
	name, err := lookup()
	if err == nil && strings.TrimSpace(name) != "" {
		return "user:" + strings.TrimSpace(name), nil
	}
	if err == nil {
		err = errors.New("it has no name")
	}
	return "", fmt.Errorf("no operator to record: name yourself with --operator NAME or ATMOST_OPERATOR (the OS user could not be found: %v)", err)
}

// scopeName shows a control's scope: its account, or what the empty scope means for its kind.
func scopeName(kind, scope string) string {
	switch {
	case scope != "":
		return scope
	case kind == "switch":
		return "global"
	case kind == "policy":
		return "default"
	}
	return "-"
}

func timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func controlsCommand() *Command {
	var kind string
	var limit int
	return &Command{Name: "controls", Summary: "controls log: every operator change to switches, policies, the epoch and accounts, and every reject replay, newest first",
		About: `Every change an operator made to a kill switch, a policy, the restore epoch or an account, and
every replay of a stored reject (atmost rejects replay), newest first: who, when, why, and the
settings before and after; for a replay, the reject's id as its scope, and its reason as stored
-> what the replay did. The log is append-only.`,
		Subs: []*Command{{Name: "log", Summary: "the changes, newest first",
			Flags: func(f *Flags) {
				f.String(&kind, "kind", strings.Join(ledger.ControlKinds(), "|"), "", "only changes of this kind")
				f.Int(&limit, "limit", "N", 20, "at most this many changes")
				f.Ledger("the ledger database")
				f.JSON("print JSON instead of a table")
			},
			Run: func(ctx context.Context, c *line) int { return controlsLog(ctx, c, kind, limit) },
		}},
	}
}

func controlsLog(ctx context.Context, c *line, kind string, limit int) int {
	if kind != "" && !slices.Contains(ledger.ControlKinds(), kind) {
		return c.usageError("--kind %q: give one of %s", kind, strings.Join(ledger.ControlKinds(), ", "))
	}
	if limit < 1 {
		return c.usageError("--limit %d: give at least 1", limit)
	}
	l, closeLedger, err := openLedger(ctx, c.databaseURL)
	if err != nil {
		return c.fail(err)
	}
	defer closeLedger()
	changes, err := l.ControlHistory(ctx, kind, limit)
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		if changes == nil {
			changes = []ledger.ControlChange{}
		}
		return writeJSON(c.io, changes)
	}
	w := tabwriter.NewWriter(c.io.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "AT\tKIND\tSCOPE\tOPERATOR\tCHANGE\tREASON")
	for _, ch := range changes {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", timestamp(ch.At), ch.Kind, scopeName(ch.Kind, ch.Scope), ch.Actor, describeChange(ch.Kind, ch.Before, ch.After), ch.Reason)
	}
	_ = w.Flush()
	return ExitOK
}

// describeChange says in one line what a change of the control history changed: a switch
// "off -> on", the epoch "1 -> 2", a policy "key: before -> after" for each field that changed.
func describeChange(kind string, before, after json.RawMessage) string {
	switch kind {
	case "switch":
		var b, a struct{ Engaged *bool }
		_ = json.Unmarshal(before, &b)
		_ = json.Unmarshal(after, &a)
		return onOff(b.Engaged) + " -> " + onOff(a.Engaged)
	case ledger.ReplayKind:
		return describeReplay(before, after)
	case "epoch":
		var b, a struct{ Epoch *int64 }
		_ = json.Unmarshal(before, &b)
		_ = json.Unmarshal(after, &a)
		if b.Epoch == nil || a.Epoch == nil {
			break
		}
		return fmt.Sprintf("%d -> %d", *b.Epoch, *a.Epoch)
	case "account":
		if string(compact(before)) == "null" {
			var a map[string]json.RawMessage
			_ = json.Unmarshal(after, &a)
			var parts []string
			for _, k := range sortedKeys(a) {
				parts = append(parts, k+": "+string(compact(a[k])))
			}
			return "added: " + strings.Join(parts, ", ")
		}
	}
	return describeFields(before, after)
}

// describeReplay says what a reject replay did: the reject's stream position and reason as
// stored, then the outcome, with the delivery key or the reason it is refused for now.
func describeReplay(before, after json.RawMessage) string {
	var b struct {
		Reason    string
		Stream    string
		StreamSeq *int64 `json:"stream_seq"`
	}
	var a struct {
		Outcome     string
		DeliveryKey *string `json:"delivery_key"`
		Reason      *string
	}
	_ = json.Unmarshal(before, &b)
	_ = json.Unmarshal(after, &a)
	from := b.Reason
	if b.StreamSeq != nil {
		from = fmt.Sprintf("%s %d %s", b.Stream, *b.StreamSeq, b.Reason)
	}
	to := strings.ReplaceAll(a.Outcome, "_", " ")
	switch {
	case a.Reason != nil:
		to += " " + *a.Reason
	case a.DeliveryKey != nil:
		to += " " + *a.DeliveryKey
	}
	return from + " -> " + to
}

// onOff shows a switch's state; nil is a switch never set, which is off.
func onOff(engaged *bool) string {
	switch {
	case engaged == nil:
		return "off (never set)"
	case *engaged:
		return "on"
	}
	return "off"
}

// describeFields lists "key: before -> after" for each key of two settings objects whose
// values differ; a missing before (a row the change created) reads as every key inherited.
func describeFields(before, after json.RawMessage) string {
	var b, a map[string]json.RawMessage
	_ = json.Unmarshal(before, &b)
	_ = json.Unmarshal(after, &a)
	var parts []string
	for _, k := range sortedKeys(a) {
		if !bytes.Equal(compact(b[k]), compact(a[k])) {
			parts = append(parts, k+": "+jsonValue(b[k])+" -> "+jsonValue(a[k]))
		}
	}
	if len(parts) == 0 {
		return "no change"
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

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

// jsonValue shows one JSON value for a table: null (an inherited policy field) as "inherit",
// a string unquoted, a list comma-separated.
func jsonValue(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v == nil {
		return "inherit"
	}
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case []any:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = fmt.Sprint(x)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return string(compact(raw))
}
