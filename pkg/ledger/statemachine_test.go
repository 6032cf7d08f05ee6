package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atmost/atmost/pkg/atmosttype"
	"github.com/atmost/atmost/pkg/ledger"
)

func TestEveryReasonLeadsToOneOfTheSixStates(t *testing.T) {
	for reason, rule := range atmosttype.Reasons() {
		require.True(t, rule.State.Valid(), "%s leads to %q", reason, rule.State)
		switch rule.State {
		case ledger.Indeterminate:
			require.Equal(t, ledger.RetryNever, rule.Retry, "%s: an unknown outcome is never retried", reason)
		case ledger.Parked:
			require.Equal(t, ledger.Human, rule.Retry, "%s: parked belongs to a human", reason)
		case ledger.Published:
			require.Equal(t, ledger.Done, rule.Retry, "%s", reason)
		}
		if rule.Retry == ledger.RetryYes || rule.Retry == ledger.RetryByPolicy {
			require.Equal(t, ledger.Failed, rule.State, "%s: only failed is retryable", reason)
		}
	}
}

// Every Reason constant atmosttype declares is in the table.
func TestEveryDeclaredReasonIsInTheTable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "atmosttype", "reason.go"), nil, 0)
	require.NoError(t, err)
	declared := 0
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok || spec.Type == nil || types(spec.Type) != "Reason" {
			return true
		}
		for _, v := range spec.Values {
			lit, ok := v.(*ast.BasicLit)
			require.True(t, ok)
			s, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			_, known := ledger.Reason(s).Rule()
			require.True(t, known, "reason %q is declared but not in atmosttype.Reasons()", s)
			declared++
		}
		return true
	})
	require.Equal(t, len(atmosttype.Reasons()), declared, "every reason in the table is declared once")
}

// Every statement the Guards table names exists, in the file it names, and every operation of
// the state machine names one.
func TestEveryGuardNamedIsAStatementOfItsFile(t *testing.T) {
	for _, op := range ledger.Operations() {
		stmts := ledger.Guards()[op]
		require.NotEmpty(t, stmts, "%s names no guarding statement", op)
		for _, s := range stmts {
			file, name, ok := strings.Cut(s, ": ")
			require.True(t, ok, "%q: want \"file.sql: QueryName\"", s)
			body, err := os.ReadFile(filepath.Join("queries", file))
			require.NoError(t, err, "%s", s)
			require.Regexp(t, regexp.MustCompile(`(?m)^-- name: `+regexp.QuoteMeta(name)+` :`), string(body), "%s", s)
		}
	}
	require.Len(t, ledger.Guards(), len(ledger.Operations()), "the table has no operation the state machine lacks")
}

func types(e ast.Expr) string {
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// The SQL writes no reason the table does not know: every quoted word in the queries is a
// state, a reason, or one of the few other words the statements use.
func TestQueriesWriteOnlyKnownReasons(t *testing.T) {
	other := map[string]bool{
		// verdicts and outcomes inside statements
		"too_late": true,
		"claim":    true, "claimed": true, "exhausted": true, "invalid_transition": true, "lease_lost": true,
		"fenced": true, "request_mismatch": true, "ok": true, "retry": true, "park": true, "lease_live": true,
		// attempt_evidence outcomes and reconciliation steps and results
		"success": true, "not_sent": true, "unknown": true, "resolved": true, "found": true,
		"not_found": true, "unavailable": true, "created": true, "duplicate": true, "unknown_account": true,
		"object_id": true, "attempt_generation": true, // the sequence and a JSON key
		// control_history kinds and the JSON keys of its before and after
		"switch": true, "policy": true, "epoch": true, "engaged": true, "reason": true,
		"attempt_cap": true, "backoff_base_ms": true, "backoff_max_ms": true, "rate_per_minute": true,
		"rate_burst": true, "text_window_seconds": true, "retryable_reasons": true,
		"account": true, "platform": true, "settings": true, "credential_ref": true, "credential_version": true,
		"revoked": true, "disabled": true, "contract_version": true, "true": true, "false": true,
		// a reject replay's kind, its outcomes and the JSON keys of its before and after
		"reject_replay": true, "already_stored": true, "outcome": true, "detail": true, "stream": true,
		"stream_seq": true, "delivery_key": true,
		// the sweeper's verdicts and the JSON key of its parking detail
		"moved": true, "not_retryable": true, "lookup_lost": true, "never_reconciled": true, "why": true,
		// the JSON keys of a dependency_unmet park's detail
		"reply_to": true, "parent_state": true, "parent_reason": true,
		// the JSON keys of a duplicate_text refusal's detail (TextHold)
		"holder": true, "window_ends_at": true, "window_seconds": true,
		// encode's format, for the holder's delivery key in its text form
		"hex": true,
		// an operator's control_history kind and the JSON key of its role
		"operator": true, "role": true,
		// a producer's control_history kind and the JSON key of its accounts
		"producer": true, "accounts": true,
		// account health: its kind, states and causes, the verdicts of its statements (and
		// Begin's), its signals, and the JSON keys of its before and after
		"health": true, "serving": true, "holding": true, "probing": true,
		"platform_unavailable": true, "auth_failed": true, "unknown_outcomes": true, "unknowns_reconciled": true,
		"trip": true, "reopen": true, "heal": true, "count": true, "none": true, "resumed": true, "auth": true,
		"state": true, "cause": true, "since": true, "next_probe_at": true, "probe_until": true, "failures": true, "unknowns": true,
		"trip_failures": true, "trip_unknowns": true, "trip_window_seconds": true, "probe_base_ms": true, "probe_max_ms": true,
		"backoff_factor": true,
	}
	files, err := filepath.Glob("queries/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	quoted := regexp.MustCompile(`'([a-z_]+)'`)
	for _, file := range files {
		body, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "--") {
				continue
			}
			for _, m := range quoted.FindAllStringSubmatch(line, -1) {
				word := m[1]
				if ledger.State(word).Valid() || other[word] {
					continue
				}
				_, known := ledger.Reason(word).Rule()
				require.True(t, known, "%s writes %q, which is neither a state nor a reason in the table", file, word)
			}
		}
	}
}

// The reasons table of docs/design.md says exactly what atmosttype.Reasons() says.
func TestTheReasonTableMatchesTheCode(t *testing.T) {
	body, err := os.ReadFile("../../docs/design.md")
	require.NoError(t, err)
	section := string(body)
	start := strings.Index(section, "### Reasons\n")
	require.GreaterOrEqual(t, start, 0)
	section = section[start:]
	if end := strings.Index(section[4:], "\n#"); end >= 0 { // the next heading ends the section
		section = section[:end+4]
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([a-z]+) \\| ([a-z ]+) \\|")
	seen := map[ledger.Reason]bool{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		reason := ledger.Reason(m[1])
		rule, ok := reason.Rule()
		require.True(t, ok, "docs/design.md lists %s, which the code does not know", reason)
		require.Equal(t, string(rule.State), m[2], "docs/design.md: state of %s", reason)
		require.Equal(t, string(rule.Retry), strings.TrimSpace(m[3]), "docs/design.md: retryability of %s", reason)
		require.False(t, seen[reason], "docs/design.md lists %s twice", reason)
		seen[reason] = true
	}
	require.Len(t, seen, len(atmosttype.Reasons()), "docs/design.md lists every reason")
}

// The state machine's tables are handed out as copies: an importer that changes what it was
// given changes nothing for the ledger or the next caller.
func TestTheStateMachineIsHandedOutAsCopies(t *testing.T) {
	tr := ledger.Transitions()
	tr[ledger.PhaseIndeterminate][ledger.OpReconcile][0] = ledger.Pending
	tr[ledger.PhasePublished] = map[ledger.Operation][]ledger.State{ledger.OpRetry: {ledger.Pending}}
	to, ok := ledger.Allowed(ledger.PhaseIndeterminate, ledger.OpReconcile)
	require.True(t, ok)
	require.Equal(t, []ledger.State{ledger.Published, ledger.Failed, ledger.Parked}, to)
	to[0] = ledger.Pending
	to, _ = ledger.Allowed(ledger.PhaseIndeterminate, ledger.OpReconcile)
	require.Equal(t, []ledger.State{ledger.Published, ledger.Failed, ledger.Parked}, to)
	_, ok = ledger.Allowed(ledger.PhasePublished, ledger.OpRetry)
	require.False(t, ok)

	guards := ledger.Guards()
	guards[ledger.OpBegin][0] = "scribbled"
	require.Equal(t, "begin_many.sql: IntentsBegin", ledger.Guards()[ledger.OpBegin][0])

	phases, ops := ledger.Phases(), ledger.Operations()
	phases[0], ops[0] = "scribbled", "scribbled"
	require.Equal(t, ledger.PhaseNone, ledger.Phases()[0])
	require.Equal(t, ledger.OpSubmit, ledger.Operations()[0])
}
